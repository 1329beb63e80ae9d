// A conversation rendered with a template and encoded: token ids plus, per token, whether it is a
// training target (the loss mask, before any shift).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "tokenizer/templates.h"
#include "tokenizer/tokenizer.h"

namespace loft::data {

struct TokenizedExample {
  std::vector<int32_t> ids;
  // trained[i] != 0: token i is a target, i.e. the loss counts predicting ids[i] from ids[0..i).
  // By default only response pieces (assistant text and the end-of-turn/EOS token after it).
  std::vector<uint8_t> trained;
  size_t size() const { return ids.size(); }
  int64_t trained_count() const;
};

// Renders `conv` with `tmpl` and encodes each piece separately. With train_on_inputs every token
// but the first (which nothing precedes) is a target. add_generation_prompt appends what opens the
// next assistant turn (a prompt for `generate --chat`).
TokenizedExample tokenize_conversation(const Conversation& conv, ChatTemplate tmpl, const Tokenizer& tok,
                                       bool train_on_inputs, bool add_generation_prompt = false);

// Keeps the first `max_tokens` tokens; returns whether anything was cut.
bool truncate_example(TokenizedExample& ex, size_t max_tokens);

nlohmann::json to_json(const TokenizedExample& ex);
// Reads to_json's output back; throws loft::Error on anything else (ids outside [0, 2^31), flags
// other than 0/1, lists of different lengths) instead of narrowing values into range.
TokenizedExample tokenized_example_from_json(const nlohmann::json& j);

}  // namespace loft::data
