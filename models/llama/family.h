// The Llama-family architectures loft reads (config.json's model_type): llama, qwen2, qwen3 and
// mistral. Each differs from Llama only in properties of LlamaConfig that the model code reads —
// which projections carry a frozen bias, a per-head RMSNorm on q and k, a sliding attention
// window — so the model never asks which family it runs (issue 28: architecture as data).
#pragma once
#include <string>

namespace loft {
class JsonFields;
}

namespace loft::llama {

struct LlamaConfig;

// Reads model_type and the keys that set the family's properties into `c` (model_type, bias,
// qk_norm, sliding_window): attention_bias / mlp_bias, use_sliding_window, sliding_window,
// layer_types. What loft does not implement (an unknown model_type, Qwen's per-layer sliding
// window, layers that mix full and sliding attention) is an Error naming the file and the key.
void read_family(const JsonFields& f, LlamaConfig& c);

// How the model differs from Llama, for `loft info` ("q/k/v bias, rope_theta 1e6"), or "" for a
// plain Llama.
std::string family_differences(const LlamaConfig& c);

}  // namespace loft::llama
