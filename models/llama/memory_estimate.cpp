// Notation: L layers, h hidden, i intermediate, q = heads·head_dim, kv = kv_heads·head_dim, V
// vocab, r LoRA rank, T = batch·seq tokens. Per layer the 7 projections hold P = Σ out·in
// weights; LoRA adds r·Σ(in + out) trainable params (A [r×in], B [out×r]) per layer.
#include "models/llama/memory_estimate.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/peft/method_spec.h"

namespace loft::llama {

namespace {

constexpr int64_t kBf16 = 2, kFp32 = 4;
// Trainable fp32 tensors cost 4 (master) + 4 (grad) + 8 (AdamW m and v) bytes per param.
constexpr int64_t kTrainableBytesPerParam = 16;

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

// Sizes come from config.json and the command line: absurd values must not wrap around (a
// vocab of 2^63-1 once gave a negative estimate). Every product and sum below is checked.
int64_t mul(int64_t a, int64_t b) { return memory_mul(a, b); }
int64_t add(int64_t a, int64_t b) { return memory_add(a, b); }
template <typename... Rest>
int64_t mul(int64_t a, int64_t b, Rest... rest) {
  return mul(mul(a, b), rest...);
}

ProjectionSizes sizes(const LlamaConfig& c, int64_t r) {
  ProjectionSizes s;
  for (const ProjShape& p : c.projections()) {
    const int64_t w = mul(p.out, p.in);
    s.weights = add(s.weights, mul(w, c.num_layers));
    s.nf4_bytes = add(s.nf4_bytes, mul(nf4_dq_bytes(w), c.num_layers));
    s.rank_in = add(s.rank_in, mul(r, p.in, c.num_layers));
    s.rank_out = add(s.rank_out, mul(r, p.out, c.num_layers));
    s.largest_layer = add(s.largest_layer, w);
    s.layer_shapes.emplace_back(p.out, p.in);
  }
  s.layers = c.num_layers;
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
  const ProjectionSizes s = sizes(c, r);

  const int64_t norms = mul(kBf16, add(mul(2, c.num_layers), 1), c.hidden_size);
  const int64_t embeddings = mul(kBf16, c.vocab_size, c.hidden_size, c.tie_word_embeddings ? 1 : 2);
  // Layers, plus the embedding output and the final RMSNorm output (bf16, h each).
  const int64_t activations =
      mul(T, add(mul(c.num_layers, activation_bytes_per_token_layer(c, r)), mul(kBf16, 2, c.hidden_size)));
  // One chunk of logits: bf16 out of the lm_head GEMM + fp32 softmax/gradient written in place.
  const int64_t logits = mul(std::min(T, opt.logits_chunk_tokens), c.vocab_size, kBf16 + kFp32);

  // Each method's rows (engine/peft/method_spec.h), in registry order.
  std::vector<MethodMemory> out;
  for (const MethodSpec* spec : method_specs())
    for (const MethodMemoryRow& row : spec->memory_rows(s)) {
      MethodMemory m;
      m.method = row.name;
      m.description = row.description;
      m.frozen_weights = add(row.frozen_bytes, norms);
      m.embeddings = embeddings;
      m.adapter_params = row.trainable;
      m.adapter = mul(kTrainableBytesPerParam, row.trainable);
      m.activations = activations;
      m.logits = logits;
      add(add(add(m.frozen_weights, m.embeddings), add(m.adapter, m.activations)), m.logits);  // total() fits
      out.push_back(std::move(m));
    }
  return out;
}

}  // namespace loft::llama
