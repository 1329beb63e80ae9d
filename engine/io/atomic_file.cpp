#include "engine/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/core/error.h"

namespace loft {

namespace {
constexpr std::string_view kTempTag = ".loft-tmp.", kOldTempTag = ".tmp.";

// Makes the rename durable; failure here loses nothing already written, so it is not fatal.
void fsync_dir(const std::filesystem::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}
}  // namespace

AtomicFile::AtomicFile(std::filesystem::path path)
    : path_(std::move(path)), tmp_(cat(path_.string(), kTempTag, ::getpid())) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(cat(tmp_, ": cannot create (", std::strerror(errno), ")"));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!done_) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t n) {
  write_at(pos_, data, n);
  pos_ += n;
}

void AtomicFile::write_at(uint64_t offset, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_, p, n, off_t(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw Error(cat(tmp_, ": write at offset ", offset, " failed (", std::strerror(errno), ")"));
    p += w;
    n -= size_t(w);
    offset += uint64_t(w);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) throw Error(cat(tmp_, ": fsync failed (", std::strerror(errno), ")"));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) throw Error(cat(tmp_, ": close failed (", std::strerror(errno), ")"));
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw Error(cat(path_.string(), ": cannot rename ", tmp_, " into place (",
                    std::strerror(errno), ")"));
  done_ = true;
  fsync_dir(path_.parent_path());
}

std::optional<std::string> atomic_file_target(std::string_view name) {
  for (const std::string_view tag : {kTempTag, kOldTempTag}) {
    const size_t at = name.rfind(tag);
    if (at == std::string_view::npos || at == 0 || at + tag.size() == name.size()) continue;
    const std::string_view pid = name.substr(at + tag.size());
    if (std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::string(name.substr(0, at));
  }
  return std::nullopt;
}

void write_file_atomic(const std::filesystem::path& path, std::string_view text) {
  AtomicFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace loft
