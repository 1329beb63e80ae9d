// A two-layer Llama small enough for exact CPU comparisons of whole training steps (grouped-query
// heads, a 300-token vocabulary): tests that compare two ways of taking the same step.
#pragma once
#include <string>

#include "models/llama/model.h"

namespace loft::test {

llama::LlamaConfig tiny_llama_config();

// The same size in each Llama-family cousin (`type` qwen2, qwen3 or mistral, read from config.json
// text): qwen2 with q/k/v biases, qwen3 with q/k norms and head_dim 32 (hidden 64, 4 heads),
// mistral with a window of 8 keys.
llama::LlamaConfig tiny_family_config(const std::string& type);
// Random weights for it (seed 3), the family's biases and q/k norm weights drawn too (not the
// ones random_llama_weights gives them), so a misplaced bias or norm changes the output.
llama::LlamaWeights tiny_family_weights(const llama::LlamaConfig& c);

// Every adapter param of `model` drawn from N(0, 0.02) (seed 9), then the compute copies
// refreshed: B starts at zero, and a non-zero one lets its term reach the output.
void randomize_adapters(llama::LlamaModel& model);

}  // namespace loft::test
