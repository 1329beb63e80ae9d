#include "tokenizer/chat_template_detect.h"

#include <fstream>

#include "engine/core/error.h"
#include "engine/io/json_read.h"

namespace loft {

std::string ChatTemplateDetection::summary() const {
  if (!has_chat_template) return "tokenizer_config.json has no chat_template";
  const std::string which = entry.empty() ? "chat_template" : cat("chat_template '", entry, "'");
  if (!family) return cat("tokenizer_config.json ", which, " is of no family loft knows");
  return cat(chat_template_name(*family), " (auto-detected from tokenizer_config.json ", which, ")");
}

std::optional<ChatTemplate> chat_template_family(std::string_view jinja) {
  const auto has = [&](std::string_view marker) { return jinja.find(marker) != std::string_view::npos; };
  if (has("<|start_header_id|>") && has("<|end_header_id|>") && has("<|eot_id|>"))
    return has("Cutting Knowledge Date") ? ChatTemplate::llama31 : ChatTemplate::llama3;
  if (has("<|im_start|>") && has("<|im_end|>")) {
    // Qwen 3's thinking blocks; Qwen 2.5's default system prompt.
    if (has("<think>")) return ChatTemplate::qwen3;
    if (has("You are Qwen, created by Alibaba Cloud.")) return ChatTemplate::qwen25;
    return ChatTemplate::chatml;
  }
  if (has("[INST]") && has("[/INST]")) {
    if (has("<<SYS>>")) return ChatTemplate::llama2;
    // Mistral 7B Instruct v0.1/v0.2 put a space before each [INST]; v0.3 none after the user text.
    if (has("' [INST] '") || has("\" [INST] \"")) return ChatTemplate::mistral;
    if (has("+ '[/INST]'") || has("+ \"[/INST]\"")) return ChatTemplate::mistral_v3;
    return ChatTemplate::llama2;
  }
  return std::nullopt;
}

ChatTemplateDetection detect_chat_template(const nlohmann::json& config, const std::string& source) {
  ChatTemplateDetection d;
  if (!config.is_object() || !config.contains("chat_template") || config["chat_template"].is_null()) return d;
  const nlohmann::json& t = config["chat_template"];
  const auto bad = [&] {
    return Error(cat(source, ": field chat_template must be a string or a list of {\"name\", \"template\"}"));
  };
  std::string jinja;
  if (t.is_string()) {
    jinja = t.get<std::string>();
  } else if (t.is_array()) {
    for (const nlohmann::json& e : t) {
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("template") ||
          !e["template"].is_string())
        throw bad();
      // transformers applies the one named "default" unless asked for another (e.g. "tool_use").
      if (d.entry.empty() || e["name"] == "default") {
        d.entry = e["name"].get<std::string>();
        jinja = e["template"].get<std::string>();
      }
    }
    if (d.entry.empty()) return d;  // an empty list
  } else {
    throw bad();
  }
  d.has_chat_template = true;
  d.family = chat_template_family(jinja);
  return d;
}

ChatTemplateDetection detect_chat_template(const std::filesystem::path& model_dir) {
  const std::filesystem::path file = model_dir / "tokenizer_config.json";
  if (!std::filesystem::exists(file)) return {};
  return detect_chat_template(read_json_file(file), file.string());
}

}  // namespace loft
