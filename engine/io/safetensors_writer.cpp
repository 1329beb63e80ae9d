#include "engine/io/safetensors_writer.h"

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/io/atomic_file.h"

namespace loft {

void write_safetensors(const std::filesystem::path& path,
                       const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string file = path.string();
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {  // std::map: name order, deterministic
    if (name.empty() || name == "__metadata__")
      throw Error(cat(file, ": invalid tensor name '", name, "'"));
    if (!t.defined()) throw Error(cat(file, ": tensor '", name, "' is undefined"));
    header[name] = {{"dtype", std::string(dtype_name(t.dtype()))},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data area 8-byte aligned (8 + len ≡ 0 mod 8)
  const uint64_t len = text.size();

  AtomicFile out(path);
  out.write(&len, 8);
  out.write(text.data(), text.size());
  for (const auto& [name, t] : tensors) {
    const Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu());
    if (host.nbytes() > 0) out.write(host.data(), host.nbytes());
  }
  out.commit();
}

}  // namespace loft
