#include "datasets/byte_stream.h"

#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "engine/core/error.h"

namespace loft::data {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

FilePtr open_file(const std::filesystem::path& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error(cat(path.string(), ": cannot open: ", std::strerror(errno)));
  return FilePtr(f);
}

size_t read_file(std::FILE* f, char* buf, size_t n, const std::filesystem::path& path) {
  const size_t got = std::fread(buf, 1, n, f);
  if (got < n && std::ferror(f)) throw Error(cat(path.string(), ": read error: ", std::strerror(errno)));
  return got;
}

// Discards bytes until `stream` reaches `target` (the stream is at or before it).
void skip_to(ByteStream& stream, uint64_t target, const std::filesystem::path& path) {
  std::vector<char> scratch(1 << 16);
  while (stream.offset() < target) {
    const size_t want = size_t(std::min<uint64_t>(scratch.size(), target - stream.offset()));
    if (stream.read(scratch.data(), want) == 0)
      throw Error(cat(path.string(), ": cannot seek to byte ", target, ": the data ends at ", stream.offset()));
  }
}

class FileByteStream final : public ByteStream {
 public:
  explicit FileByteStream(std::filesystem::path path) : path_(std::move(path)), file_(open_file(path_)) {}

  size_t read(char* buf, size_t n) override {
    const size_t got = read_file(file_.get(), buf, n, path_);
    offset_ += got;
    return got;
  }

  void seek(uint64_t offset) override {
    if (fseeko(file_.get(), off_t(offset), SEEK_SET) != 0)
      throw Error(cat(path_.string(), ": cannot seek to byte ", offset, ": ", std::strerror(errno)));
    offset_ = offset;
  }

  uint64_t offset() const override { return offset_; }

 private:
  std::filesystem::path path_;
  FilePtr file_;
  uint64_t offset_ = 0;
};

class ZstdByteStream final : public ByteStream {
 public:
  explicit ZstdByteStream(std::filesystem::path path)
      : path_(std::move(path)), file_(open_file(path_)), dctx_(ZSTD_createDCtx()), in_buf_(ZSTD_DStreamInSize()) {
    if (!dctx_) throw Error(cat(path_.string(), ": cannot create a zstd decompression context"));
  }
  ~ZstdByteStream() override { ZSTD_freeDCtx(dctx_); }

  size_t read(char* buf, size_t n) override {
    ZSTD_outBuffer out{buf, n, 0};
    while (out.pos == 0 && n > 0) {
      if (in_.pos == in_.size && !file_done_) {
        in_.size = read_file(file_.get(), in_buf_.data(), in_buf_.size(), path_);
        in_.pos = 0;
        in_.src = in_buf_.data();
        file_done_ = in_.size == 0;
      }
      const bool input_left = in_.pos < in_.size;
      if (!input_left && !frame_open_) break;  // clean end: every frame was complete
      decompress(out);
      // No input left, a frame still open and nothing more to flush: the file was cut short.
      if (!input_left && out.pos == 0 && frame_open_)
        throw Error(cat(path_.string(), ": truncated zstd stream (the file ends inside a frame)"));
    }
    offset_ += out.pos;
    return out.pos;
  }

  void seek(uint64_t offset) override {
    if (offset < offset_) {
      if (fseeko(file_.get(), 0, SEEK_SET) != 0)
        throw Error(cat(path_.string(), ": cannot rewind: ", std::strerror(errno)));
      ZSTD_DCtx_reset(dctx_, ZSTD_reset_session_only);
      in_ = ZSTD_inBuffer{in_buf_.data(), 0, 0};
      offset_ = 0;
      file_done_ = frame_open_ = false;
    }
    skip_to(*this, offset, path_);
  }

  uint64_t offset() const override { return offset_; }

 private:
  void decompress(ZSTD_outBuffer& out) {
    const size_t ret = ZSTD_decompressStream(dctx_, &out, &in_);
    if (ZSTD_isError(ret))
      throw Error(cat(path_.string(), ": corrupt zstd data near compressed byte ", compressed_offset(), ": ",
                      ZSTD_getErrorName(ret)));
    frame_open_ = ret != 0;  // non-zero: the frame needs more input or has more to flush
  }

  uint64_t compressed_offset() const { return uint64_t(ftello(file_.get())) - (in_.size - in_.pos); }

  std::filesystem::path path_;
  FilePtr file_;
  ZSTD_DCtx* dctx_;
  std::vector<char> in_buf_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  uint64_t offset_ = 0;
  bool file_done_ = false;
  bool frame_open_ = false;
};

}  // namespace

bool is_zstd_path(const std::filesystem::path& path) { return path.extension() == ".zst"; }

std::unique_ptr<ByteStream> open_byte_stream(const std::filesystem::path& path) {
  if (std::filesystem::is_directory(path)) throw Error(cat(path.string(), ": is a directory, not a data file"));
  if (is_zstd_path(path)) return std::make_unique<ZstdByteStream>(path);
  return std::make_unique<FileByteStream>(path);
}

}  // namespace loft::data
