// Files that appear whole or not at all: written to `<path>.tmp.<pid>` in the same folder,
// fsync'd, renamed over `path`, and the folder fsync'd. A crash leaves the old file (or none).
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace loft {

class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path path);
  ~AtomicFile();  // removes the temporary unless commit() ran
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  // Makes the file durable and moves it into place. Throws Error naming the file on failure.
  void commit();

 private:
  std::filesystem::path path_;
  std::string tmp_;
  int fd_ = -1;
  bool done_ = false;
};

// `text` as the whole content of `path`, atomically.
void write_file_atomic(const std::filesystem::path& path, std::string_view text);

}  // namespace loft
