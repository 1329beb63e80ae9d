#include "app/chat_prompt.h"

#include <filesystem>
#include <fstream>

#include "datasets/data_config.h"
#include "datasets/record.h"
#include "datasets/tokenize.h"
#include "engine/core/error.h"
#include "tokenizer/chat_template_detect.h"

namespace loft::app {

namespace fs = std::filesystem;

namespace {

// The template a loft run recorded for its training data (run_config.json "chat_template").
std::optional<ChatTemplate> trained_template(const std::string& adapter_dir) {
  if (adapter_dir.empty()) return std::nullopt;
  const fs::path file = fs::path(adapter_dir).parent_path() / "run_config.json";
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("chat_template") || !j["chat_template"].is_string()) return std::nullopt;
  try {
    return parse_chat_template(j["chat_template"].get<std::string>());
  } catch (const UsageError&) {
    throw Error(cat(file.string(), ": chat_template \"", j["chat_template"].get<std::string>(),
                    "\" is not a template this loft knows"));
  }
}

}  // namespace

ChatChoice resolve_chat_template(const std::string& option, const std::string& model_dir,
                                 const std::string& adapter_dir, const Tokenizer& tok) {
  if (!option.empty() && option != "auto") return {parse_chat_template(option), "--template"};
  const ChatTemplateDetection d = detect_chat_template(model_dir);
  if (d.family) return {*d.family, "the model's chat template"};
  if (auto t = trained_template(adapter_dir)) return {*t, "the adapter's training run"};
  // As finetune renders chat records for this model (datasets/data_config.h).
  return {data::default_template(data::RecordFormat::messages, tok), "the tokenizer's chat markers"};
}

Conversation chat_conversation(const nlohmann::json& entry, const std::string& system, const std::string& where) {
  Conversation conv;
  if (entry.is_string()) {
    conv.turns.push_back({Role::user, entry.get<std::string>(), {}});
  } else if (entry.is_object() && entry.contains("prompt") && entry["prompt"].is_string()) {
    conv.turns.push_back({Role::user, entry["prompt"].get<std::string>(), {}});
  } else {
    const auto format = data::detect_format(entry);
    if (!format)
      throw Error(cat(where, ": expected a JSON string, {\"prompt\": ...} or a chat record (messages, sharegpt, alpaca)"));
    try {
      conv = data::to_conversation(entry, *format);
    } catch (const data::BadRecord& e) {
      throw Error(cat(where, ": ", e.what()));
    }
    // A record of fields (alpaca's output, a completion, gsm8k's answer) holds its reference
    // answer beside the prompt: the prompt is the rest. A conversation's own last turn is never
    // dropped unseen: ending with the assistant, it holds nothing to answer.
    const bool list = *format == data::RecordFormat::messages || *format == data::RecordFormat::sharegpt;
    if (!conv.turns.empty() && conv.turns.back().role == Role::assistant) {
      if (list)
        throw Error(cat(where, ": the conversation ends with an assistant turn; generate --chat writes the "
                               "assistant's reply to a last user turn (end the record with the user's message)"));
      conv.turns.pop_back();
    }
  }
  if (conv.turns.empty() || conv.turns.back().role != Role::user)
    throw Error(cat(where, ": a chat prompt must end with a user turn"));
  if (!system.empty() && conv.turns.front().role != Role::system)
    conv.turns.insert(conv.turns.begin(), Turn{Role::system, system, {}});
  return conv;
}

std::vector<int32_t> chat_prompt_ids(const Conversation& conv, ChatTemplate t, const Tokenizer& tok) {
  return data::tokenize_conversation(conv, t, tok, /*train_on_inputs=*/false, /*add_generation_prompt=*/true).ids;
}

}  // namespace loft::app
