// Record formats: detection from a record's keys and parsing into a normalised Conversation.
//   alpaca             {"instruction", "input"?, "output"}
//   messages           {"messages": [{"role": system|user|assistant, "content"}]}
//   sharegpt           {"conversations": [{"from": system|human|user|gpt|assistant, "value"}]}
//   prompt_completion  {"prompt", "completion"}
//   text               {"text"}, and every record of a .txt file
//   gsm8k              {"question", "answer"}
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "tokenizer/templates.h"

namespace loft::data {

enum class RecordFormat { alpaca, messages, sharegpt, prompt_completion, text, gsm8k };

// Throws loft::UsageError naming --format for an unknown name.
RecordFormat parse_record_format(std::string_view name);
std::string_view record_format_name(RecordFormat f);

// The format a JSON record's keys indicate, or nullopt when they fit none.
std::optional<RecordFormat> detect_format(const nlohmann::json& record);

// A record that cannot be used; what() is the reason without the file and line (the caller adds them).
class BadRecord : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses the JSON text of one record. Throws BadRecord for invalid JSON (including invalid UTF-8),
// a missing field or a field of the wrong type.
nlohmann::json parse_json_record(std::string_view text);
Conversation to_conversation(const nlohmann::json& record, RecordFormat format);
// A text record. Throws BadRecord when `text` is not valid UTF-8, naming the byte offset.
Conversation text_conversation(std::string text);

// The byte offset of the first invalid UTF-8 sequence in `s`, or nullopt.
std::optional<size_t> find_invalid_utf8(std::string_view s);

}  // namespace loft::data
