// Sequential byte streams over a data file: plain, or zstd-compressed and decompressed on the fly
// (libzstd's streaming API, one input and one output buffer: memory never grows with the file).
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

namespace loft::data {

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Reads up to n bytes into buf; returns 0 only at the end of the data. Throws loft::Error naming
  // the file on a read error or a corrupt/truncated compressed stream.
  virtual size_t read(char* buf, size_t n) = 0;
  // Moves to an offset in the *uncompressed* data. A zstd stream has no index, so it seeks by
  // decompressing and discarding (forward from where it is, or from the start when going back).
  virtual void seek(uint64_t offset) = 0;
  // Offset in the uncompressed data of the next byte read() returns.
  virtual uint64_t offset() const = 0;
};

// True when `path` names a zstd file (".zst" suffix).
bool is_zstd_path(const std::filesystem::path& path);
// Opens `path`, through zstd when it ends in ".zst". Throws loft::Error naming the file when it
// cannot be opened.
std::unique_ptr<ByteStream> open_byte_stream(const std::filesystem::path& path);

}  // namespace loft::data
