// Which of loft's templates a model's own chat template is, read from the `chat_template` of its
// tokenizer_config.json. There is no Jinja engine: a known family is recognised by its markers
// (Llama 3 headers, Llama 2 [INST], ChatML <|im_start|>), and loft renders that family itself.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/templates.h"

namespace loft {

struct ChatTemplateDetection {
  bool has_chat_template = false;       // tokenizer_config.json carries a chat_template
  std::optional<ChatTemplate> family;   // the family it was recognised as
  std::string entry;                    // for a list of templates: the name of the one used
  // One line for `loft info` and notes: what was found and why it maps (or does not).
  std::string summary() const;
};

// The family whose markers `jinja` carries: Llama 3 headers (with Llama 3.1's "Cutting Knowledge
// Date" system block: llama3.1); else ChatML (qwen3 with <think>, qwen2.5 with Qwen 2.5's default
// system prompt); else [INST]: llama2 with <<SYS>>, mistral with " [INST] " (Mistral 7B Instruct
// v0.1/v0.2), mistral-v3 with "...'[/INST]'" (v0.3), llama2 otherwise; nullopt for anything else.
std::optional<ChatTemplate> chat_template_family(std::string_view jinja);

// From a parsed tokenizer_config.json. `chat_template` may be a string or a list of
// {"name", "template"} (the one named "default", as transformers picks, else the first); other
// shapes throw loft::Error naming `source` and the field.
ChatTemplateDetection detect_chat_template(const nlohmann::json& tokenizer_config, const std::string& source);
// From DIR/tokenizer_config.json; an absent file means no chat template. Throws loft::Error naming
// the file when it is not valid JSON.
ChatTemplateDetection detect_chat_template(const std::filesystem::path& model_dir);

}  // namespace loft
