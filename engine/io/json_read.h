// The one way loft reads JSON: every config, header, state file and data record goes through
// parse_json, which bounds nesting depth (nlohmann::json's dump and comparison recurse, so a value
// 100k levels deep would overflow the stack), turns every library exception (syntax, number
// overflow such as 1e999, trailing content) into one line, and never echoes the input unbounded.
// Errors quote input through brief(), never through dump().
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace loft {

// Deepest nesting of arrays/objects accepted anywhere (real files nest fewer than 10 levels).
inline constexpr int kMaxJsonDepth = 128;
// Largest JSON file read whole (config.json, tokenizer.json, adapter_config.json, ...).
inline constexpr std::uintmax_t kMaxJsonFileBytes = std::uintmax_t(1) << 30;

// Parses `text` as one JSON value; on failure returns nullopt and sets `error` to one line
// ("not valid JSON (syntax error while parsing value ...)", "JSON nested deeper than 128 levels at
// byte 9").
std::optional<nlohmann::json> try_parse_json(std::string_view text, std::string& error);
// Same, throwing loft::Error("<source>: <error>").
nlohmann::json parse_json(std::string_view text, const std::string& source);
// Same, keeping the keys in the text's order.
nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& source);
// Reads and parses a whole file; errors name the file (missing, unreadable, too large, invalid).
nlohmann::json read_json_file(const std::filesystem::path& file);
// The text of a JSON file, at most kMaxJsonFileBytes (for readers that parse it themselves).
std::string read_json_text(const std::filesystem::path& file);

// A bounded description of a JSON value for error messages: its type and at most ~80 characters
// of its compact text ("array [[[[[[...").
std::string brief(const nlohmann::json& v);
// At most `max` bytes of arbitrary text, quoted, with "..." when cut (names, option values).
std::string brief(std::string_view s, size_t max = 80);
inline std::string brief(const std::string& s, size_t max = 80) { return brief(std::string_view(s), max); }

}  // namespace loft
