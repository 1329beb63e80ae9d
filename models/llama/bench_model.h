// Models for `loft bench`: the named Llama shapes of scripts/dev/peft_baseline.py (plus `tiny`
// for CPU tests), and random weights made directly on the device, so a 7B benchmark needs no
// checkpoint and no host copy.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/llama/config.h"
#include "models/llama/weights.h"

namespace loft::llama {

// "llama-7b", "llama-13b", "llama3-8b", "tinyllama-1.1b", "qwen2.5-7b", "qwen3-8b", "mistral-7b",
// "tiny".
std::vector<std::string> bench_shape_names();
// The config of a named shape, nullopt for an unknown name, read from config.json text as a
// checkpoint's is. Fields the baseline leaves to transformers' configs keep their defaults (rms eps
// 1e-6, untied lm_head, head_dim = hidden / heads unless given); max_position_embeddings is 4096 as
// the baseline sets it. The cousins carry their family's properties (Qwen2.5's q/k/v biases,
// Qwen3's q/k norms and head_dim, rope θ 1e6).
std::optional<LlamaConfig> bench_shape_config(const std::string& name);

// Weights for `cfg` in `dtype` on `device`: every matrix from ops::fill_random with std 0.02
// (transformers' initializer_range; uniform here, normal there: speed does not care), RMSNorm
// weights 1. Each tensor draws its own seed from `seed`, so the result is reproducible. The
// embedding table ends in host memory where embedding_in_host_memory says so.
// `projections_drawn`: the 7 projections are drawn only when LlamaModel builds their layer
// (LlamaLayerWeights::draw: the same values, from the same seeds), each just before its method
// re-encodes it, so a model whose dense weights exceed the card, or the host, still builds.
LlamaWeights random_llama_weights(const LlamaConfig& cfg, DType dtype, Device device,
                                  uint64_t seed = 0, bool projections_drawn = false);

// Elements of every weight a model of `cfg` holds (a tied lm_head counts once).
int64_t llama_parameter_count(const LlamaConfig& cfg);

}  // namespace loft::llama
