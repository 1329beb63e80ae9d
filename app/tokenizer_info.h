// The tokenizer part of `loft info`: kind, vocabulary, BOS/EOS/pad/unk, special tokens, whether BOS
// is added by default, the chat template chat data would use (and whether it was auto-detected
// from tokenizer_config.json), the stop ids and generation_config.json's defaults.
#pragma once
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

#include "datasets/data_config.h"
#include "models/llama/generation_config.h"
#include "tokenizer/chat_template_detect.h"
#include "tokenizer/tokenizer.h"

namespace loft::app {

struct TokenizerInfo {
  std::unique_ptr<Tokenizer> tok;  // null when the folder's tokenizer does not load
  std::string load_error;          // then: why
  ChatTemplateDetection detection;
  ChatTemplate chat_template = ChatTemplate::plain;  // what messages/sharegpt data use by default
  std::optional<llama::GenerationSettings> generation;  // with a tokenizer only
};

// Throws loft::Error for a bad tokenizer_config.json, generation_config.json or config.json (naming
// the file); a tokenizer that does not load is reported in the result instead.
TokenizerInfo describe_tokenizer(const std::filesystem::path& model_dir);

// The text of `id` for people: an added/special token's content, else its piece.
std::string token_text(const Tokenizer& tok, int32_t id);

// Fields "tokenizer", "chat_template", "stop_ids" and "generation_config" added to `j`.
void add_tokenizer_json(nlohmann::json& j, const TokenizerInfo& info);
void print_tokenizer_text(std::ostream& out, const TokenizerInfo& info);

}  // namespace loft::app
