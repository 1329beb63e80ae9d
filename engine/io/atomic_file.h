// Files that appear whole or not at all: written to `<path>.loft-tmp.<pid>` in the same folder,
// fsync'd, renamed over `path`, and the folder fsync'd. A crash leaves the old file (or none) and
// the temporary, which run folders remove when they are claimed again (engine/train/run_folder.h).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
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
  // Writes at byte `offset` of the file (pwrite), leaving the position of write() alone: for formats
  // whose parts arrive out of order (a GGUF tensor at its precomputed offset).
  void write_at(uint64_t offset, const void* data, size_t n);
  // Makes the file durable and moves it into place. Throws Error naming the file on failure.
  void commit();

 private:
  std::filesystem::path path_;
  std::string tmp_;
  int fd_ = -1;
  uint64_t pos_ = 0;  // where write() continues
  bool done_ = false;
};

// The file `name` is a temporary of ("metrics.jsonl" for "metrics.jsonl.loft-tmp.123"; also the
// ".tmp.<pid>" names loft wrote before), or nothing when it is not one.
std::optional<std::string> atomic_file_target(std::string_view name);

// `text` as the whole content of `path`, atomically.
void write_file_atomic(const std::filesystem::path& path, std::string_view text);

}  // namespace loft
