// A JSON array file read element by element: a small scanner finds each top-level element's byte
// range (tracking strings, escapes and nesting) and hands those bytes on as one record; parsing the
// element is the record parser's job. Memory is the input buffer plus one element.
#include "datasets/record_reader.h"
#include "engine/core/error.h"

namespace loft::data {
namespace {

enum State { kBeforeArray = 0, kInArray = 1, kDone = 2 };

class JsonArrayReader final : public RecordReader {
 public:
  JsonArrayReader(const std::filesystem::path& path, size_t max_bytes) : in_(path), max_bytes_(max_bytes) {}

  bool next(RawRecord& rec) override {
    if (state_ == kBeforeArray) open_array();
    if (state_ == kDone) return false;
    skip_blank();
    const int c = in_.peek();
    if (c == -1) fail("the JSON array is not closed (the file ends)");
    if (c == ']') {  // an empty array, or a trailing comma before ']'
      in_.get();
      close_array();
      return false;
    }
    rec.start = position();
    rec.text.clear();
    scan_element(rec.text, rec.start.stream.line);
    skip_blank();
    const int sep = in_.get();
    if (sep == ']')
      close_array();
    else if (sep == -1)
      fail("the JSON array is not closed (the file ends)");
    else if (sep != ',')
      fail("expected ',' or ']' after an array element");
    return true;
  }

  ReaderPos position() const override { return {in_.pos(), state_}; }
  void seek(const ReaderPos& pos) override {
    in_.seek(pos.stream);
    state_ = pos.state;
  }
  RecordKind kind() const override { return RecordKind::json; }
  const std::filesystem::path& path() const override { return in_.path(); }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw Error(cat(in_.path().string(), ":", in_.pos().line, ": ", what));
  }

  // After the closing ']' only blanks may follow.
  void close_array() {
    state_ = kDone;
    skip_blank();
    if (in_.peek() != -1) fail("unexpected content after the JSON array's closing ']'");
  }

  void skip_blank() {
    for (int c = in_.peek(); c == ' ' || c == '\t' || c == '\r' || c == '\n'; c = in_.peek()) in_.get();
  }

  void open_array() {
    if (in_.peek() == 0xEF) {  // UTF-8 byte order mark
      for (int i = 0; i < 3; ++i) in_.get();
    }
    skip_blank();
    const int c = in_.get();
    if (c == -1) {  // an empty file holds no records
      state_ = kDone;
      return;
    }
    if (c != '[') fail("expected '[' at the start of a JSON array file");
    state_ = kInArray;
  }

  void append(std::string& out, int c, uint64_t start_line) {
    if (out.size() >= max_bytes_)
      throw Error(cat(in_.path().string(), ":", start_line, ": array element is longer than ", max_bytes_,
                      " bytes (the record size limit)"));
    out.push_back(char(c));
  }

  // Copies one element: an object/array up to its matching close, a string up to its closing
  // quote, or a bare literal up to the next ',', ']' or blank.
  void scan_element(std::string& out, uint64_t start_line) {
    const int first = in_.peek();
    if (first != '{' && first != '[' && first != '"') {
      for (int c = in_.peek(); c != -1 && c != ',' && c != ']' && c != ' ' && c != '\n' && c != '\r' && c != '\t';
           c = in_.peek())
        append(out, in_.get(), start_line);
      return;
    }
    int depth = 0;
    bool in_string = false, escaped = false;
    for (;;) {
      const int c = in_.get();
      if (c == -1)
        throw Error(cat(in_.path().string(), ":", start_line, ": the array element starting here is not closed"));
      append(out, c, start_line);
      if (in_string) {
        if (escaped)
          escaped = false;
        else if (c == '\\')
          escaped = true;
        else if (c == '"')
          in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        --depth;
      }
      if (depth == 0 && !in_string) return;
    }
  }

  BufferedInput in_;
  size_t max_bytes_;
  int state_ = kBeforeArray;
};

}  // namespace

std::unique_ptr<RecordReader> make_json_array_reader(const std::filesystem::path& path, size_t max_record_bytes) {
  return std::make_unique<JsonArrayReader>(path, max_record_bytes);
}

}  // namespace loft::data
