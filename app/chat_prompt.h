// `loft generate --chat`: prompts rendered with a chat template, as the model (or the adapter) was
// trained to read them, ending with the opening of the assistant's turn.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/templates.h"
#include "tokenizer/tokenizer.h"

namespace loft::app {

struct ChatChoice {
  ChatTemplate tmpl = ChatTemplate::plain;
  std::string origin;  // why this template: "--template", "model chat template", "adapter's training run"
};

// --template NAME, or for "auto": the family of the model's own chat template
// (tokenizer_config.json), else the template the adapter was trained with (the run's
// run_config.json beside the adapter folder), else what finetune uses for chat records with this
// tokenizer (its Llama 3 / ChatML markers, else Llama 2's [INST]).
ChatChoice resolve_chat_template(const std::string& option, const std::string& model_dir,
                                 const std::string& adapter_dir, const Tokenizer& tok);

// One --prompts line (or --prompt) as a conversation: a JSON string or {"prompt": ...} is one user
// turn, any dataset record (messages, sharegpt, alpaca) its turns; `system` (non-empty) opens it
// unless it has a system turn. It must end with a user turn. `where` names the line in errors.
Conversation chat_conversation(const nlohmann::json& entry, const std::string& system, const std::string& where);

// The prompt ids: the conversation rendered with `t` plus the generation prompt.
std::vector<int32_t> chat_prompt_ids(const Conversation& conv, ChatTemplate t, const Tokenizer& tok);

}  // namespace loft::app
