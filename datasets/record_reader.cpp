#include "datasets/record_reader.h"

#include "engine/io/json_fields.h"

#include "engine/core/error.h"

namespace loft::data {

nlohmann::json to_json(const ReaderPos& pos) {
  return {{"offset", pos.stream.offset}, {"line", pos.stream.line}, {"state", pos.state}};
}

ReaderPos reader_pos_from_json(const nlohmann::json& j) {
  const JsonFields f(j, "the saved data position", "pos.");
  return {{uint64_t(f.integer("offset", 0)), uint64_t(f.integer("line", 0))}, f.int32("state")};
}

namespace {

bool is_blank(const std::string& s) { return s.find_first_not_of(" \t\r") == std::string::npos; }

// One JSON value per line; '\r' before '\n' is dropped (CRLF files), blank lines are skipped.
class JsonlReader final : public RecordReader {
 public:
  JsonlReader(const std::filesystem::path& path, size_t max_bytes) : in_(path), max_bytes_(max_bytes) {}

  bool next(RawRecord& rec) override {
    for (;;) {
      rec.text.clear();
      rec.start = position();
      if (!in_.read_line(rec.text, max_bytes_)) return false;
      if (!rec.text.empty() && rec.text.back() == '\r') rec.text.pop_back();
      if (!is_blank(rec.text)) return true;
    }
  }
  ReaderPos position() const override { return {in_.pos(), 0}; }
  void seek(const ReaderPos& pos) override { in_.seek(pos.stream); }
  RecordKind kind() const override { return RecordKind::json; }
  const std::filesystem::path& path() const override { return in_.path(); }

 private:
  BufferedInput in_;
  size_t max_bytes_;
};

// The first non-blank byte of a file (-1 when there is none).
int first_nonblank_byte(const std::filesystem::path& path) {
  BufferedInput in(path);
  for (int c = in.get(); c != -1; c = in.get())
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return c;
  return -1;
}

}  // namespace

std::unique_ptr<RecordReader> make_jsonl_reader(const std::filesystem::path& path, size_t max_record_bytes) {
  return std::make_unique<JsonlReader>(path, max_record_bytes);
}

std::unique_ptr<RecordReader> open_record_reader(const std::filesystem::path& path, size_t max_record_bytes) {
  if (!std::filesystem::exists(path)) throw UsageError(cat(path.string(), ": no such data file"));
  const std::filesystem::path inner = is_zstd_path(path) ? path.stem() : path;
  const std::string ext = inner.extension().string();
  if (ext == ".jsonl") return make_jsonl_reader(path, max_record_bytes);
  if (ext == ".txt") return make_text_reader(path, max_record_bytes);
  if (ext == ".json") {
    // Many ".json" datasets are really JSONL; an array starts with '['.
    if (first_nonblank_byte(path) == '{') return make_jsonl_reader(path, max_record_bytes);
    return make_json_array_reader(path, max_record_bytes);
  }
  throw UsageError(cat(path.string(), ": unsupported data file type '", ext,
                       "' (expected .jsonl, .json or .txt, each optionally .zst-compressed)"));
}

}  // namespace loft::data
