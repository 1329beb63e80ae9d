#include "engine/io/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace loft {

namespace {

// Closes the fd and removes the temporary file unless release() was called.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error(cat(path_, ": cannot create (", std::strerror(errno), ")"));
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!done_) ::unlink(path_.c_str());
  }
  void write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) throw Error(cat(path_, ": write failed (", std::strerror(errno), ")"));
      p += w;
      n -= size_t(w);
    }
  }
  void commit(const std::string& final_path) {
    if (::fsync(fd_) != 0) throw Error(cat(path_, ": fsync failed (", std::strerror(errno), ")"));
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) throw Error(cat(path_, ": close failed (", std::strerror(errno), ")"));
    if (::rename(path_.c_str(), final_path.c_str()) != 0)
      throw Error(
          cat(final_path, ": cannot rename ", path_, " into place (", std::strerror(errno), ")"));
    done_ = true;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool done_ = false;
};

// Makes the rename durable; failure here loses nothing already written, so it is not fatal.
void fsync_dir(const std::filesystem::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

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

  const std::string tmp = cat(file, ".tmp.", ::getpid());
  TempFile out(tmp);
  out.write(&len, 8);
  out.write(text.data(), text.size());
  for (const auto& [name, t] : tensors) {
    const Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu());
    if (host.nbytes() > 0) out.write(host.data(), host.nbytes());
  }
  out.commit(file);
  fsync_dir(path.parent_path());
}

}  // namespace loft
