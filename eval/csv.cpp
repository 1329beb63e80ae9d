#include "eval/csv.h"

#include <fstream>
#include <sstream>

#include "engine/core/error.h"

namespace loft::eval {

std::vector<CsvRecord> parse_csv(const std::string& text, const std::string& name, size_t columns) {
  std::vector<CsvRecord> out;
  size_t i = 0;
  int64_t line = 1;
  const size_t n = text.size();
  if (n >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;  // a UTF-8 byte-order mark
  while (i < n) {
    if (text[i] == '\n' || (text[i] == '\r' && i + 1 < n && text[i + 1] == '\n')) {  // empty line
      i += text[i] == '\r' ? 2 : 1;
      ++line;
      continue;
    }
    CsvRecord rec;
    rec.line = line;
    std::string field;
    bool end_of_record = false;
    while (!end_of_record) {
      field.clear();
      if (i < n && text[i] == '"') {
        const int64_t open_line = line;
        ++i;
        for (;;) {
          if (i >= n)
            throw Error(cat(name, ":", open_line, ": a quoted field is not closed"));
          if (text[i] == '"') {
            if (i + 1 < n && text[i + 1] == '"') {
              field += '"';
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (text[i] == '\n') ++line;
          field += text[i++];
        }
        if (i < n && text[i] != ',' && text[i] != '\n' && !(text[i] == '\r' && i + 1 < n && text[i + 1] == '\n'))
          throw Error(cat(name, ":", line, ": unexpected text after a closing quote"));
      } else {
        while (i < n && text[i] != ',' && text[i] != '\n' && !(text[i] == '\r' && i + 1 < n && text[i + 1] == '\n'))
          field += text[i++];
      }
      rec.fields.push_back(field);
      if (i < n && text[i] == ',') {
        ++i;
      } else {
        if (i < n) {
          i += text[i] == '\r' ? 2 : 1;
          ++line;
        }
        end_of_record = true;
      }
    }
    if (columns > 0 && rec.fields.size() != columns)
      throw Error(cat(name, ":", rec.line, ": ", rec.fields.size(), " columns, expected ", columns));
    out.push_back(std::move(rec));
  }
  return out;
}

std::vector<CsvRecord> read_csv(const std::filesystem::path& file, size_t columns) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(cat("cannot open ", file.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_csv(ss.str(), file.string(), columns);
}

}  // namespace loft::eval
