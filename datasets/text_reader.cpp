// Plain text (.txt) records. The rule:
//   - a file whose first 1 MiB contains "<|endoftext|>" is split into documents at every
//     "<|endoftext|>" (TinyStories ships that way); each document, with the blanks around it
//     trimmed, is one text record;
//   - any other file: each non-blank line (without its "\n" or "\r\n") is one text record.
// Blank documents and blank lines are skipped.
#include <algorithm>
#include <string_view>

#include "datasets/record_reader.h"
#include "engine/core/error.h"

namespace loft::data {
namespace {

constexpr std::string_view kSeparator = "<|endoftext|>";
constexpr size_t kProbeBytes = 1 << 20;

bool has_separator_near_start(const std::filesystem::path& path) {
  BufferedInput in(path);
  std::string head;
  for (int c = in.get(); c != -1 && head.size() < kProbeBytes; c = in.get()) head.push_back(char(c));
  return head.find(kSeparator) != std::string::npos;
}

void trim(std::string& s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  const auto last = std::find_if_not(s.rbegin(), s.rend(), blank).base();
  s.erase(last, s.end());
  s.erase(s.begin(), std::find_if_not(s.begin(), s.end(), blank));
}

class TextReader final : public RecordReader {
 public:
  TextReader(const std::filesystem::path& path, size_t max_bytes)
      : in_(path), max_bytes_(max_bytes), documents_(has_separator_near_start(path)) {}

  bool next(RawRecord& rec) override {
    for (;;) {
      rec.text.clear();
      rec.start = position();
      const bool got = documents_ ? read_document(rec) : read_line(rec);
      if (!got) return false;
      trim(rec.text);
      if (!rec.text.empty()) return true;
    }
  }
  ReaderPos position() const override { return {in_.pos(), 0}; }
  void seek(const ReaderPos& pos) override { in_.seek(pos.stream); }
  RecordKind kind() const override { return RecordKind::text; }
  const std::filesystem::path& path() const override { return in_.path(); }

 private:
  bool read_line(RawRecord& rec) { return in_.read_line(rec.text, max_bytes_); }

  bool read_document(RawRecord& rec) {
    int c = in_.get();
    if (c == -1) return false;
    for (; c != -1; c = in_.get()) {
      if (rec.text.size() >= max_bytes_ + kSeparator.size())
        throw Error(cat(in_.path().string(), ":", rec.line(), ": document is longer than ", max_bytes_,
                        " bytes (the record size limit)"));
      rec.text.push_back(char(c));
      if (c == '>' && rec.text.ends_with(kSeparator)) {
        rec.text.resize(rec.text.size() - kSeparator.size());
        return true;
      }
    }
    return true;
  }

  BufferedInput in_;
  size_t max_bytes_;
  bool documents_;
};

}  // namespace

std::unique_ptr<RecordReader> make_text_reader(const std::filesystem::path& path, size_t max_record_bytes) {
  return std::make_unique<TextReader>(path, max_record_bytes);
}

}  // namespace loft::data
