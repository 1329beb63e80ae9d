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

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

// Sizes come from config.json and the command line: absurd values must not wrap around (a
// vocab of 2^63-1 once gave a negative estimate). Every product and sum below is checked.
[[noreturn]] void overflow(int64_t a, const char* op, int64_t b) {
  throw UsageError(cat("memory estimate overflows 64 bits (", a, op, b,
                       "); the model's sizes, batch, seq or rank are too large"));
}
int64_t mul(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_mul_overflow(a, b, &out)) overflow(a, " x ", b);
  return out;
}
int64_t add(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_add_overflow(a, b, &out)) overflow(a, " + ", b);
  return out;
}
template <typename... Rest>
int64_t mul(int64_t a, int64_t b, Rest... rest) {
  return mul(mul(a, b), rest...);
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
    const int64_t w = mul(p.out, p.in);
    s.proj_params = add(s.proj_params, mul(w, c.num_layers));
    s.proj_nf4 = add(s.proj_nf4, mul(nf4_dq_bytes(w), c.num_layers));
    s.lora_params = add(s.lora_params, mul(r, add(p.in, p.out), c.num_layers));
    s.falqon_a = add(s.falqon_a, mul(r, p.in, c.num_layers));
    s.falqon_b = add(s.falqon_b, mul(r, p.out, c.num_layers));
    s.max_layer_proj = add(s.max_layer_proj, w);
  }
  return s;
}

}  // namespace

int64_t nf4_dq_bytes(int64_t n) {
  const int64_t blocks = ceil_div(n, 64);
  return add(add(ceil_div(n, 2), blocks), mul(add(ceil_div(blocks, 256), 1), kFp32));
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
      add(add(add(mul(4, c.hidden_size), mul(2, c.q_dim())), add(mul(2, c.kv_dim()), mul(3, c.intermediate_size))),
          mul(7, r));
  return add(mul(kBf16, bf16_values), mul(kFp32, add(2, c.num_heads)));
}

std::vector<MethodMemory> estimate_training_memory(const LlamaConfig& c,
                                                   const MemoryEstimateOptions& opt) {
  LOFT_CHECK(opt.batch > 0 && opt.seq > 0 && opt.lora_rank > 0 && opt.logits_chunk_tokens > 0,
             "memory estimate: batch, seq, rank and chunk must be positive");
  const int64_t r = opt.lora_rank, T = mul(opt.batch, opt.seq);
  const Sizes s = sizes(c, r);

  const int64_t norms = mul(kBf16, add(mul(2, c.num_layers), 1), c.hidden_size);
  const int64_t embeddings = mul(kBf16, c.vocab_size, c.hidden_size, c.tie_word_embeddings ? 1 : 2);
  // Layers, plus the embedding output and the final RMSNorm output (bf16, h each).
  const int64_t activations =
      mul(T, add(mul(c.num_layers, activation_bytes_per_token_layer(c, r)), mul(kBf16, 2, c.hidden_size)));
  // One chunk of logits: bf16 out of the lm_head GEMM + fp32 softmax/gradient written in place.
  const int64_t logits = mul(std::min(T, opt.logits_chunk_tokens), c.vocab_size, kBf16 + kFp32);

  auto method = [&](std::string name, std::string what, int64_t frozen, int64_t trainable) {
    MethodMemory m;
    m.method = std::move(name);
    m.description = std::move(what);
    m.frozen_weights = add(frozen, norms);
    m.embeddings = embeddings;
    m.adapter_params = trainable;
    m.adapter = mul(kTrainableBytesPerParam, trainable);
    m.activations = activations;
    m.logits = logits;
    add(add(add(m.frozen_weights, m.embeddings), add(m.adapter, m.activations)), m.logits);  // total() fits
    return m;
  };
  const int64_t P = s.proj_params;
  return {
      method("lora-bf16", "bf16 W", mul(kBf16, P), s.lora_params),
      method("qlora-nf4", "NF4 W with double quantization (4.127 bits/param)", s.proj_nf4,
             s.lora_params),
      // [W; A] in E4M3 (1 byte each) + a transposed E4M3 copy of W for dX; only B trains.
      method("falqon-fp8", "E4M3 [W; A] + transposed E4M3 W", add(mul(2, P), s.falqon_a), s.falqon_b),
      // Q(W·H) rotated once at load + its transpose, 1 byte each; LoRA in bf16 beside it.
      method("halo-fp8", "E4M3 rotated W + transposed copy", mul(2, P), s.lora_params),
      method("halo-int8", "INT8 rotated W + transposed copy", mul(2, P), s.lora_params),
      // NF4 backbone, dequantized one layer at a time into FP8 codes (W and its transpose).
      method("halo-nf4", "NF4 rotated W + one layer of FP8 scratch",
             add(s.proj_nf4, mul(2, s.max_layer_proj)), s.lora_params),
  };
}

}  // namespace loft::llama
