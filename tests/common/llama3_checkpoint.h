// A Llama-3-shaped checkpoint written at test time (never committed): Llama 3's 128,256-token
// vocabulary, GQA, llama3 rope scaling, eos_token_id [128001, 128008, 128009], a
// generation_config.json, random bf16 weights, and the real Llama 3 tokenizer.json with a
// tokenizer_config.json from the test data's tokenizers/llama3. Tiny elsewhere (hidden 64, 2
// layers), so it trains on the CPU in seconds.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "models/llama/config.h"

namespace loft::test {

struct Llama3CheckpointOptions {
  bool tied = false;     // tie_word_embeddings (no lm_head.weight)
  bool instruct = true;  // tokenizer_config.json of Llama 3 Instruct (eos <|eot_id|>), else the base's
  uint64_t seed = 0;     // the random weights
  // Spread of the weight matrices. Larger than transformers' 0.02, so that logits span a few units
  // and a LoRA can lower the loss visibly within a few CPU steps.
  float init_std = 0.1f;
};

// Llama 3's ids for the special tokens the tests name (128008 is Llama 3.1's <|eom_id|>; the
// Llama 3 tokenizer.json of the test data names it <|reserved_special_token_4|>).
inline constexpr int32_t kLlama3Vocab = 128256, kBeginOfText = 128000, kEndOfText = 128001, kEomId = 128008,
                         kEotId = 128009, kStartHeader = 128006, kEndHeader = 128007;

// The config.json text the checkpoint carries.
std::string llama3_config_json(bool tied);
// Writes config.json, generation_config.json, model.safetensors, tokenizer.json and
// tokenizer_config.json into `dir` (created if missing); returns the parsed config. The tokenizer
// is test data tests/data leaves out: callers start with LOFT_REQUIRE_DATA("tokenizers/llama3").
llama::LlamaConfig write_llama3_checkpoint(const std::filesystem::path& dir, const Llama3CheckpointOptions& o = {});

}  // namespace loft::test
