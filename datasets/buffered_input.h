// A byte stream read through one fixed-size buffer, keeping the byte offset and line number of the
// next byte, so readers can report "file:line" and record exact, seekable positions.
#pragma once
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "datasets/byte_stream.h"

namespace loft::data {

// Where a reader stands in its file: the next byte's offset (in uncompressed data) and 1-based line.
struct StreamPos {
  uint64_t offset = 0;
  uint64_t line = 1;
  bool operator==(const StreamPos&) const = default;
};

class BufferedInput {
 public:
  static constexpr size_t kBufferBytes = 1 << 16;

  explicit BufferedInput(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  StreamPos pos() const { return {base_offset_ + head_, line_}; }
  void seek(const StreamPos& pos);

  // Next byte, or -1 at the end of the data.
  int get() {
    if (head_ == size_ && !refill()) return -1;
    const char c = buf_[head_++];
    if (c == '\n') ++line_;
    return static_cast<unsigned char>(c);
  }
  int peek() {
    if (head_ == size_ && !refill()) return -1;
    return static_cast<unsigned char>(buf_[head_]);
  }
  // Appends bytes up to (not including) the next '\n' to `out` and consumes the '\n'. Returns false
  // when the data had already ended. Throws loft::Error naming file and line once `out` would pass
  // `max_bytes`, so one runaway line cannot exhaust memory.
  bool read_line(std::string& out, size_t max_bytes);

 private:
  bool refill();

  std::filesystem::path path_;
  std::unique_ptr<ByteStream> stream_;
  std::vector<char> buf_;
  size_t head_ = 0, size_ = 0;
  uint64_t base_offset_ = 0;  // offset of buf_[0]
  uint64_t line_ = 1;
};

}  // namespace loft::data
