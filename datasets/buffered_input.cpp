#include "datasets/buffered_input.h"

#include "engine/core/error.h"

namespace loft::data {

BufferedInput::BufferedInput(const std::filesystem::path& path)
    : path_(path), stream_(open_byte_stream(path)), buf_(kBufferBytes) {}

bool BufferedInput::refill() {
  base_offset_ += size_;
  head_ = size_ = 0;
  size_ = stream_->read(buf_.data(), buf_.size());
  return size_ > 0;
}

void BufferedInput::seek(const StreamPos& pos) {
  // Within the bytes already buffered: just move the cursor (readers often step back a little).
  if (pos.offset >= base_offset_ && pos.offset <= base_offset_ + size_) {
    head_ = size_t(pos.offset - base_offset_);
  } else {
    stream_->seek(pos.offset);
    base_offset_ = pos.offset;
    head_ = size_ = 0;
  }
  line_ = pos.line;
}

bool BufferedInput::read_line(std::string& out, size_t max_bytes) {
  if (head_ == size_ && !refill()) return false;
  const uint64_t start_line = line_;
  for (;;) {
    const char* begin = buf_.data() + head_;
    const char* nl = static_cast<const char*>(std::memchr(begin, '\n', size_ - head_));
    const size_t n = nl ? size_t(nl - begin) : size_ - head_;
    if (out.size() + n > max_bytes)
      throw Error(cat(path_.string(), ":", start_line, ": line is longer than ", max_bytes,
                      " bytes (the record size limit)"));
    out.append(begin, n);
    head_ += n;
    if (nl) {
      ++head_;
      ++line_;
      return true;
    }
    if (!refill()) return true;  // last line without a final '\n'
  }
}

}  // namespace loft::data
