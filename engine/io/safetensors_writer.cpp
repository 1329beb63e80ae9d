#include "engine/io/safetensors_writer.h"

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/io/atomic_file.h"

namespace loft {

namespace {

// The header text (JSON padded so the data area is 8-byte aligned), offsets in slot order.
std::string header_text(const std::string& file, const std::vector<SafetensorsSlot>& slots,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const SafetensorsSlot& s : slots) {
    if (s.name.empty() || s.name == "__metadata__")
      throw Error(cat(file, ": invalid tensor name '", s.name, "'"));
    if (header.contains(s.name)) throw Error(cat(file, ": tensor '", s.name, "' is listed twice"));
    header[s.name] = {{"dtype", std::string(dtype_name(s.dtype))},
                      {"shape", s.shape},
                      {"data_offsets", {offset, offset + s.nbytes()}}};
    offset += s.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data area 8-byte aligned (8 + len ≡ 0 mod 8)
  return text;
}

}  // namespace

SafetensorsStreamWriter::SafetensorsStreamWriter(const std::filesystem::path& path,
                                                 std::vector<SafetensorsSlot> slots,
                                                 const std::map<std::string, std::string>& metadata)
    : path_(path), slots_(std::move(slots)) {
  const std::string text = header_text(path_.string(), slots_, metadata);
  const uint64_t len = text.size();
  out_ = std::make_unique<AtomicFile>(path_);
  out_->write(&len, 8);
  out_->write(text.data(), text.size());
}

SafetensorsStreamWriter::~SafetensorsStreamWriter() = default;

void SafetensorsStreamWriter::add(const std::string& name, const Tensor& t) {
  const std::string file = path_.string();
  if (next_ >= slots_.size())
    throw Error(cat(file, ": tensor '", name, "' written after the last declared one"));
  const SafetensorsSlot& s = slots_[next_];
  if (name != s.name)
    throw Error(cat(file, ": tensor '", name, "' written where '", s.name, "' is declared"));
  if (!t.defined() || t.dtype() != s.dtype || t.shape() != s.shape)
    throw Error(cat(file, ": tensor '", name, "' is ", t.defined() ? t.str() : "undefined",
                    ", declared ", dtype_name(s.dtype), " ", shape_str(s.shape)));
  const Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu());
  if (host.nbytes() > 0) out_->write(host.data(), host.nbytes());
  ++next_;
}

void SafetensorsStreamWriter::commit() {
  if (next_ != slots_.size())
    throw Error(cat(path_.string(), ": ", slots_.size() - next_, " declared tensors not written (",
                    slots_[next_].name, " next)"));
  out_->commit();
}

size_t SafetensorsStreamWriter::data_bytes(const std::vector<SafetensorsSlot>& slots) {
  size_t n = 0;
  for (const SafetensorsSlot& s : slots) n += s.nbytes();
  return n;
}

void write_safetensors(const std::filesystem::path& path,
                       const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsSlot> slots;
  for (const auto& [name, t] : tensors) {  // std::map: name order, deterministic
    if (!t.defined()) throw Error(cat(path.string(), ": tensor '", name, "' is undefined"));
    slots.push_back({name, t.dtype(), t.shape()});
  }
  SafetensorsStreamWriter out(path, std::move(slots), metadata);
  for (const auto& [name, t] : tensors) out.add(name, t);
  out.commit();
}

}  // namespace loft
