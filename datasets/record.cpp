#include "datasets/record.h"

#include "engine/core/error.h"
#include "engine/io/json_read.h"

namespace loft::data {
namespace {

constexpr RecordFormat kAllFormats[] = {RecordFormat::alpaca,           RecordFormat::messages,
                                        RecordFormat::sharegpt,         RecordFormat::prompt_completion,
                                        RecordFormat::text,             RecordFormat::gsm8k};

const nlohmann::json& field(const nlohmann::json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end()) throw BadRecord(cat("missing field '", key, "'"));
  return *it;
}

std::string string_field(const nlohmann::json& obj, const char* key) {
  const nlohmann::json& v = field(obj, key);
  if (!v.is_string()) throw BadRecord(cat("field '", key, "' must be a string, not ", v.type_name()));
  return v.get<std::string>();
}

std::string optional_string_field(const nlohmann::json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  return string_field(obj, key);
}

Role parse_role(const std::string& name, const char* list_key, size_t index) {
  if (name == "system") return Role::system;
  if (name == "user" || name == "human") return Role::user;
  if (name == "assistant" || name == "gpt") return Role::assistant;
  throw BadRecord(cat(list_key, "[", index, "]: unknown role ", brief(name), " (expected system, user or assistant)"));
}

// messages / sharegpt: a list of turns whose role and text live under the given keys.
Conversation turns_from_list(const nlohmann::json& record, const char* list_key, const char* role_key,
                             const char* text_key) {
  const nlohmann::json& list = field(record, list_key);
  if (!list.is_array()) throw BadRecord(cat("field '", list_key, "' must be an array, not ", list.type_name()));
  Conversation conv;
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& m = list[i];
    if (!m.is_object()) throw BadRecord(cat(list_key, "[", i, "] must be an object, not ", m.type_name()));
    try {
      conv.turns.push_back({parse_role(string_field(m, role_key), list_key, i), string_field(m, text_key), {}});
    } catch (const BadRecord& e) {
      if (std::string_view(e.what()).starts_with(list_key)) throw;
      throw BadRecord(cat(list_key, "[", i, "]: ", e.what()));
    }
  }
  return conv;
}

Conversation exchange(std::string prompt, std::string response, std::string input = {}) {
  Conversation conv;
  conv.turns.push_back({Role::user, std::move(prompt), std::move(input)});
  conv.turns.push_back({Role::assistant, std::move(response), {}});
  return conv;
}

}  // namespace

RecordFormat parse_record_format(std::string_view name) {
  for (RecordFormat f : kAllFormats)
    if (record_format_name(f) == name) return f;
  throw UsageError(cat("--format: unknown record format '", name,
                       "' (expected alpaca, messages, sharegpt, prompt_completion, text or gsm8k)"));
}

std::string_view record_format_name(RecordFormat f) {
  switch (f) {
    case RecordFormat::alpaca: return "alpaca";
    case RecordFormat::messages: return "messages";
    case RecordFormat::sharegpt: return "sharegpt";
    case RecordFormat::prompt_completion: return "prompt_completion";
    case RecordFormat::text: return "text";
    case RecordFormat::gsm8k: return "gsm8k";
  }
  return "?";
}

std::optional<RecordFormat> detect_format(const nlohmann::json& r) {
  if (!r.is_object()) return std::nullopt;
  // Most specific first: Alpaca files often carry a "text" field beside instruction/output.
  if (r.contains("messages")) return RecordFormat::messages;
  if (r.contains("conversations")) return RecordFormat::sharegpt;
  if (r.contains("instruction") && r.contains("output")) return RecordFormat::alpaca;
  if (r.contains("prompt") && r.contains("completion")) return RecordFormat::prompt_completion;
  if (r.contains("question") && r.contains("answer")) return RecordFormat::gsm8k;
  if (r.contains("text")) return RecordFormat::text;
  return std::nullopt;
}

nlohmann::json parse_json_record(std::string_view text) {
  std::string error;
  auto j = try_parse_json(text, error);  // bounded depth; number overflow (1e999) is an error too
  if (j) return std::move(*j);
  constexpr std::string_view kSyntax = "not valid JSON (";
  if (error.starts_with(kSyntax) && error.ends_with(")"))
    error = error.substr(kSyntax.size(), error.size() - kSyntax.size() - 1);
  throw BadRecord(cat("invalid JSON: ", error));
}

Conversation to_conversation(const nlohmann::json& r, RecordFormat format) {
  if (!r.is_object()) throw BadRecord(cat("record must be a JSON object, not ", r.type_name()));
  switch (format) {
    case RecordFormat::alpaca:
      return exchange(string_field(r, "instruction"), string_field(r, "output"), optional_string_field(r, "input"));
    case RecordFormat::messages: return turns_from_list(r, "messages", "role", "content");
    case RecordFormat::sharegpt: return turns_from_list(r, "conversations", "from", "value");
    case RecordFormat::prompt_completion: return exchange(string_field(r, "prompt"), string_field(r, "completion"));
    case RecordFormat::text: return text_conversation(string_field(r, "text"));
    case RecordFormat::gsm8k: return exchange(string_field(r, "question"), string_field(r, "answer"));
  }
  throw BadRecord("unknown record format");
}

Conversation text_conversation(std::string text) {
  if (const auto bad = find_invalid_utf8(text)) throw BadRecord(cat("invalid UTF-8 at byte ", *bad, " of the text"));
  Conversation conv;
  conv.turns.push_back({Role::assistant, std::move(text), {}});
  return conv;
}

std::optional<size_t> find_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not valid UTF-8.
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return i;
    i += len;
  }
  return std::nullopt;
}

}  // namespace loft::data
