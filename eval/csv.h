// A small RFC-4180 CSV reader (what MMLU's files need): fields separated by commas, a field in
// double quotes may hold commas, line breaks and "" for a quote; records end at LF or CRLF. Every
// record must have the expected number of fields: a wrong count is an Error naming file:line.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace loft::eval {

struct CsvRecord {
  int64_t line = 0;  // 1-based line where the record starts
  std::vector<std::string> fields;
};

// Parses `text` (named `name` in errors). columns > 0: every record must have exactly that many
// fields. An unterminated quoted field is an Error. Empty lines are skipped.
std::vector<CsvRecord> parse_csv(const std::string& text, const std::string& name, size_t columns);
std::vector<CsvRecord> read_csv(const std::filesystem::path& file, size_t columns);

}  // namespace loft::eval
