#include "engine/io/json_read.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/core/error.h"

namespace loft {

namespace {

// Byte offset of the first place nesting exceeds kMaxJsonDepth, or npos. Brackets inside
// strings do not count; a malformed text is left for the parser to describe. A string's content
// is skipped with memchr to its closing quote (one not preceded by an odd run of backslashes),
// so the scan costs little beside the parse even for a large vocabulary.
size_t too_deep_at(std::string_view text) {
  int depth = 0;
  const char* const begin = text.data();
  const char* const end = begin + text.size();
  for (const char* p = begin; p < end; ++p) {
    const char c = *p;
    if (c == '"') {
      for (;;) {  // p is on the opening quote or on an escaped one
        p = static_cast<const char*>(std::memchr(p + 1, '"', size_t(end - p - 1)));
        if (!p) return std::string_view::npos;  // unterminated: the parser will say so
        size_t backslashes = 0;
        while (p[-1 - std::ptrdiff_t(backslashes)] == '\\') ++backslashes;
        if (backslashes % 2 == 0) break;
      }
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return size_t(p - begin);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, ..." without the tag.
std::string without_tag(const char* what) {
  std::string_view msg = what;
  if (const auto close = msg.find("] "); msg.starts_with("[json.exception") && close != msg.npos)
    msg.remove_prefix(close + 2);
  return std::string(msg.substr(0, 200));
}

// A JSON string literal of at most the first `max` bytes of s (invalid UTF-8 replaced).
std::string quoted(const std::string& s, size_t max) {
  return nlohmann::json(s.substr(0, max))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Appends at most `budget` characters of v's compact JSON; recursion ends when the budget does,
// and every level spends at least one character, so depth is bounded by the budget.
void write_bounded(const nlohmann::json& v, std::string& out, size_t budget) {
  if (out.size() >= budget) return;
  if (v.is_array() || v.is_object()) {
    out += v.is_array() ? '[' : '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out.size() < budget; ++it) {
      if (!first) out += ',';
      first = false;
      if (v.is_object()) out += quoted(it.key(), budget) + ':';
      write_bounded(*it, out, budget);
    }
    if (out.size() < budget) out += v.is_array() ? ']' : '}';
    return;
  }
  if (v.is_string()) {
    out += quoted(v.get_ref<const std::string&>(), budget);
    return;
  }
  out += v.dump();
}

// try_parse_json for either nlohmann type (ordered_json keeps the file's key order).
template <typename Json>
std::optional<Json> try_parse_as(std::string_view text, std::string& error) {
  if (const size_t at = too_deep_at(text); at != std::string_view::npos) {
    error = cat("JSON nested deeper than ", kMaxJsonDepth, " levels at byte ", at);
    return std::nullopt;
  }
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    error = "not valid JSON (" + without_tag(e.what()) + ")";
  }
  return std::nullopt;
}

template <typename Json>
Json parse_as(std::string_view text, const std::string& source) {
  std::string error;
  auto j = try_parse_as<Json>(text, error);
  if (!j) throw Error(cat(source, ": ", error));
  return std::move(*j);
}

}  // namespace

std::optional<nlohmann::json> try_parse_json(std::string_view text, std::string& error) {
  return try_parse_as<nlohmann::json>(text, error);
}

nlohmann::json parse_json(std::string_view text, const std::string& source) {
  return parse_as<nlohmann::json>(text, source);
}

nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& source) {
  return parse_as<nlohmann::ordered_json>(text, source);
}

std::string read_json_text(const std::filesystem::path& file) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (ec) throw Error(cat(file.string(), ": cannot read (", ec.message(), ")"));
  if (size > kMaxJsonFileBytes)
    throw Error(cat(file.string(), ": ", size, " bytes is more than the ", kMaxJsonFileBytes,
                    "-byte limit for a JSON file"));
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(cat(file.string(), ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

nlohmann::json read_json_file(const std::filesystem::path& file) {
  return parse_json(read_json_text(file), file.string());
}

std::string brief(const nlohmann::json& v) {
  constexpr size_t kBudget = 80;
  std::string text;
  write_bounded(v, text, kBudget);
  if (text.size() > kBudget) text.resize(kBudget);
  const bool cut = text.size() >= kBudget;
  return cat(v.type_name(), " ", text, cut ? "..." : "");
}

std::string brief(std::string_view s, size_t max) {
  if (s.size() <= max) return cat("'", s, "'");
  return cat("'", s.substr(0, max), "...' (", s.size(), " bytes)");
}

}  // namespace loft
