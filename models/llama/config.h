// The architecture of a Llama-family checkpoint (llama, qwen2, qwen3, mistral), read from its
// Hugging Face config.json. Both the transformers 4 spelling (top-level rope_theta + rope_scaling)
// and the transformers 5 one (rope_parameters: {rope_theta, rope_type, ...}) are understood. How a
// family differs from Llama is a property here (bias, qk_norm, sliding_window: family.h).
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops/rope_freq.h"
#include "models/llama/fp8_config.h"

namespace loft::llama {

// The seven frozen projections of a decoder layer, each an nn.Linear with weight [out, in].
enum class Proj { Q, K, V, O, Gate, Up, Down };
constexpr int kNumProj = 7;
// "q", "k", "v", "o", "gate", "up", "down".
const char* proj_name(Proj p);
struct ProjShape {
  Proj proj;
  int64_t out, in;
};

// Upper bounds on config.json's sizes, checked before anything is allocated (the largest Llama
// checkpoints are far inside them: 405B has 126 layers, hidden 16384, vocab 128256). Together they
// keep every size product (vocab x hidden, layers x projection params) inside int64.
constexpr int64_t kMaxHidden = int64_t(1) << 17;        // hidden_size, head_dim
constexpr int64_t kMaxIntermediate = int64_t(1) << 19;  // intermediate_size
constexpr int64_t kMaxLayers = 1024;                    // num_hidden_layers
constexpr int64_t kMaxHeads = 4096;                     // num_attention_heads, num_key_value_heads
constexpr int64_t kMaxVocab = int64_t(1) << 24;         // vocab_size
constexpr int64_t kMaxPositions = int64_t(1) << 24;     // max_position_embeddings

struct LlamaConfig {
  std::string model_type = "llama";  // llama, qwen2, qwen3 or mistral (family.h)
  std::string architecture;  // architectures[0] when given, e.g. "LlamaForCausalLM"
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;    // num_hidden_layers
  int64_t num_heads = 0;     // num_attention_heads
  int64_t num_kv_heads = 0;  // num_key_value_heads (default: num_heads)
  int64_t head_dim = 0;      // default: hidden_size / num_heads
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 2048;  // transformers' LlamaConfig defaults where optional
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // eos_token_id may be one id or a list
  std::string torch_dtype;             // "dtype"/"torch_dtype" as written (informational)
  std::optional<Fp8Checkpoint> quantization;  // an FP8 checkpoint's quantization_config
  // The family's differences from Llama (models/llama/family.cpp sets them from model_type):
  // the projections, by Proj, that add a frozen bias [out] after their product (Qwen2's q, k, v;
  // Llama's attention_bias / mlp_bias; Qwen3's attention_bias);
  std::array<bool, kNumProj> bias{};
  // an RMSNorm over each head's query and key (weights [head_dim], eps rms_norm_eps) between the
  // projection and RoPE (Qwen3);
  bool qk_norm = false;
  // a sliding window: a query sees only the last sliding_window keys, itself included; 0 = all
  // (Mistral).
  int64_t sliding_window = 0;

  bool has_bias(Proj p) const { return bias[size_t(p)]; }
  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  // Shapes of q, k, v, o, gate, up, down, in that order.
  std::array<ProjShape, kNumProj> projections() const;
  int64_t projection_params_per_layer() const;

  // Parses and validates; `source` names the file in errors ("DIR/config.json: field ...").
  static LlamaConfig from_json_text(const std::string& text, const std::string& source);
};

// Reads `path`, or `path`/config.json when `path` is a folder. Throws Error naming the file and
// the field at fault (missing, wrong type, inconsistent, unsupported).
LlamaConfig load_llama_config(const std::filesystem::path& path);

}  // namespace loft::llama
