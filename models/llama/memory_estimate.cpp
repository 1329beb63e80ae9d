// Notation: L layers, h hidden, i intermediate, q = heads·head_dim, kv = kv_heads·head_dim, V
// vocab, r LoRA rank, T = batch·seq tokens. Per layer the 7 projections hold P = Σ out·in
// weights; LoRA adds r·Σ(in + out) trainable params (A [r×in], B [out×r]) per layer.
#include "models/llama/memory_estimate.h"

#include <algorithm>

#include "engine/core/error.h"

namespace loft::llama {

namespace {

constexpr int64_t kBf16 = 2, kFp32 = 4;
// Trainable fp32 tensors cost 4 (master) + 4 (grad) + 8 (AdamW m and v) bytes per param.
constexpr int64_t kTrainableBytesPerParam = 16;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// batch, seq and rank come from the command line: absurd values must not wrap around.
int64_t checked_mul(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_mul_overflow(a, b, &out))
    throw UsageError(
        cat("memory estimate overflows 64 bits (", a, " x ", b, "); batch, seq or rank too large"));
  return out;
}

struct Sizes {
  int64_t proj_params = 0;     // P·L
  int64_t proj_nf4 = 0;        // Σ nf4_dq_bytes over every projection tensor
  int64_t max_layer_proj = 0;  // P (one layer)
  int64_t lora_params = 0;     // r·Σ(in + out)·L
  int64_t falqon_a = 0;        // r·Σ in·L : the A rows melded into [W; A]
  int64_t falqon_b = 0;        // r·Σ out·L: B, the only trainable tensor
};

Sizes sizes(const LlamaConfig& c, int64_t r) {
  Sizes s;
  for (const ProjShape& p : c.projections()) {
    s.proj_params += p.out * p.in * c.num_layers;
    s.proj_nf4 += nf4_dq_bytes(p.out * p.in) * c.num_layers;
    s.lora_params += r * (p.in + p.out) * c.num_layers;
    s.falqon_a += r * p.in * c.num_layers;
    s.falqon_b += r * p.out * c.num_layers;
  }
  s.max_layer_proj = c.projection_params_per_layer();
  return s;
}

}  // namespace

int64_t nf4_dq_bytes(int64_t n) {
  const int64_t blocks = ceil_div(n, 64);
  return ceil_div(n, 2) + blocks + ceil_div(blocks, 256) * kFp32 + kFp32;
}

// Saved per token per layer, bf16 unless noted:
//   residual input and its RMSNorm output, for attention and for the MLP     4h
//   q (post-RoPE) and the attention output (input of o_proj)                  2q
//   k and v                                                                   2kv
//   gate, up and silu(gate)·up (input of down_proj)                           3i
//   x·Aᵀ of the 7 LoRA projections                                            7r
//   fp32: 2 RMSNorm rstd + 1 softmax log-sum-exp per head (a fused attention
//         that never stores the [seq × seq] scores)                           2 + heads
// The same formula is used for every method: FALQON keeps x·Aᵀ but not the projection inputs,
// so it can save somewhat less than this.
int64_t activation_bytes_per_token_layer(const LlamaConfig& c, int64_t r) {
  const int64_t bf16_values =
      4 * c.hidden_size + 2 * c.q_dim() + 2 * c.kv_dim() + 3 * c.intermediate_size + 7 * r;
  return kBf16 * bf16_values + kFp32 * (2 + c.num_heads);
}

std::vector<MethodMemory> estimate_training_memory(const LlamaConfig& c,
                                                   const MemoryEstimateOptions& opt) {
  LOFT_CHECK(opt.batch > 0 && opt.seq > 0 && opt.lora_rank > 0 && opt.logits_chunk_tokens > 0,
             "memory estimate: batch, seq, rank and chunk must be positive");
  const int64_t r = opt.lora_rank, T = checked_mul(opt.batch, opt.seq);
  const Sizes s = sizes(c, r);

  const int64_t norms = kBf16 * (2 * c.num_layers + 1) * c.hidden_size;
  const int64_t embeddings = kBf16 * c.vocab_size * c.hidden_size * (c.tie_word_embeddings ? 1 : 2);
  // Layers, plus the embedding output and the final RMSNorm output (bf16, h each).
  const int64_t activations =
      checked_mul(T, checked_mul(c.num_layers, activation_bytes_per_token_layer(c, r)) +
                         kBf16 * 2 * c.hidden_size);
  // One chunk of logits: bf16 out of the lm_head GEMM + fp32 softmax/gradient written in place.
  const int64_t logits = std::min(T, opt.logits_chunk_tokens) * c.vocab_size * (kBf16 + kFp32);

  auto method = [&](std::string name, std::string what, int64_t frozen, int64_t trainable) {
    MethodMemory m;
    m.method = std::move(name);
    m.description = std::move(what);
    m.frozen_weights = frozen + norms;
    m.embeddings = embeddings;
    m.adapter_params = trainable;
    m.adapter = kTrainableBytesPerParam * trainable;
    m.activations = activations;
    m.logits = logits;
    return m;
  };
  const int64_t P = s.proj_params;
  return {
      method("lora-bf16", "bf16 W", kBf16 * P, s.lora_params),
      method("qlora-nf4", "NF4 W with double quantization (4.127 bits/param)", s.proj_nf4,
             s.lora_params),
      // [W; A] in E4M3 (1 byte each) + a transposed E4M3 copy of W for dX; only B trains.
      method("falqon-fp8", "E4M3 [W; A] + transposed E4M3 W", 2 * P + s.falqon_a, s.falqon_b),
      // Q(W·H) rotated once at load + its transpose, 1 byte each; LoRA in bf16 beside it.
      method("halo-fp8", "E4M3 rotated W + transposed copy", 2 * P, s.lora_params),
      method("halo-int8", "INT8 rotated W + transposed copy", 2 * P, s.lora_params),
      // NF4 backbone, dequantized one layer at a time into FP8 codes (W and its transpose).
      method("halo-nf4", "NF4 rotated W + one layer of FP8 scratch",
             s.proj_nf4 + 2 * s.max_layer_proj, s.lora_params),
  };
}

}  // namespace loft::llama
