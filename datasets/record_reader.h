// Streams the raw records of one data file, one at a time, with bounded memory:
//   .jsonl        one JSON value per line (blank lines are skipped);
//   .json         a JSON array (as Alpaca ships), scanned element by element — never loaded whole;
//                 a .json file whose first byte is not '[' is read as JSONL;
//   .txt          plain text, see text_reader.cpp for the record rule;
//   any of them + ".zst": decompressed on the fly.
// Every record carries the position where it starts, so it can be read again after a seek (the
// data loader's exact resume re-reads its shuffle buffer that way).
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "datasets/buffered_input.h"

namespace loft::data {

// A reader's position: the stream position plus a small reader-defined state (JSON array: before
// '[', inside, or after ']').
struct ReaderPos {
  StreamPos stream;
  int state = 0;
  bool operator==(const ReaderPos&) const = default;
};
nlohmann::json to_json(const ReaderPos& pos);
ReaderPos reader_pos_from_json(const nlohmann::json& j);

struct RawRecord {
  std::string text;  // the record's bytes: a JSON value, or a text document
  ReaderPos start;   // seek here and call next() to read this record again
  uint64_t line() const { return start.stream.line; }
};

enum class RecordKind { json, text };

class RecordReader {
 public:
  virtual ~RecordReader() = default;
  // The next record, or false at the end of the file. Throws loft::Error naming file and line when
  // the file's structure is broken (a JSON array not closed, a record over the size limit, ...).
  virtual bool next(RawRecord& rec) = 0;
  // Position just past the last record returned.
  virtual ReaderPos position() const = 0;
  virtual void seek(const ReaderPos& pos) = 0;
  virtual RecordKind kind() const = 0;
  virtual const std::filesystem::path& path() const = 0;
};

// Opens `path` by its extension. Throws loft::UsageError naming the file for an unsupported type.
// `max_record_bytes` bounds one record (a line, an array element, a text document).
std::unique_ptr<RecordReader> open_record_reader(const std::filesystem::path& path, size_t max_record_bytes);

// The individual readers (open_record_reader picks one).
std::unique_ptr<RecordReader> make_jsonl_reader(const std::filesystem::path& path, size_t max_record_bytes);
std::unique_ptr<RecordReader> make_json_array_reader(const std::filesystem::path& path, size_t max_record_bytes);
std::unique_ptr<RecordReader> make_text_reader(const std::filesystem::path& path, size_t max_record_bytes);

}  // namespace loft::data
