// Notation: L layers, h hidden, i intermediate, q = heads·head_dim, kv = kv_heads·head_dim, V
// vocab, r LoRA rank, T = batch·seq tokens, e the compute dtype's bytes (2 on a GPU, 4 on the
// CPU). Per layer the 7 projections hold P = Σ out·in weights; LoRA adds r·Σ(in + out) trainable
// params (A [r×in], B [out×r]) per layer.
#include "models/llama/memory_estimate.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/peft/method_spec.h"

namespace loft::llama {

namespace {

constexpr int64_t kFp32 = 4;
// Trainable fp32 tensors cost 4 (master) + 4 (grad) + 8 (AdamW m and v) bytes per param.
constexpr int64_t kTrainableBytesPerParam = 16;
constexpr int64_t kBatchBytesPerToken = 4 * 4;  // ids, targets, positions, doc_start: I32

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

// Sizes come from config.json and the command line: absurd values must not wrap around (a
// vocab of 2^63-1 once gave a negative estimate). Every product and sum below is checked.
int64_t mul(int64_t a, int64_t b) { return memory_mul(a, b); }
int64_t add(int64_t a, int64_t b) { return memory_add(a, b); }
template <typename... Rest>
int64_t mul(int64_t a, int64_t b, Rest... rest) {
  return mul(mul(a, b), rest...);
}
template <typename... Rest>
int64_t add(int64_t a, int64_t b, Rest... rest) {
  return add(add(a, b), rest...);
}

ProjectionSizes sizes(const LlamaConfig& c, int64_t r, int64_t e) {
  ProjectionSizes s;
  for (const ProjShape& p : c.projections()) {
    const int64_t w = mul(p.out, p.in);
    s.weights = add(s.weights, mul(w, c.num_layers));
    s.nf4_bytes = add(s.nf4_bytes, mul(nf4_dq_bytes(w), c.num_layers));
    s.rank_in = add(s.rank_in, mul(r, p.in, c.num_layers));
    s.rank_out = add(s.rank_out, mul(r, p.out, c.num_layers));
    s.largest_layer = add(s.largest_layer, w);
    s.largest_projection = std::max(s.largest_projection, w);
    s.layer_shapes.emplace_back(p.out, p.in);
  }
  s.layers = c.num_layers;
  s.compute_bytes = e;
  return s;
}

// A layer's frozen values beyond its norms and projections, per element: the biases and the
// per-head q/k norm weights (LlamaConfig's family properties).
int64_t family_extras_per_layer(const LlamaConfig& c) {
  int64_t n = c.qk_norm ? mul(2, c.head_dim) : 0;
  for (const ProjShape& p : c.projections())
    if (c.has_bias(p.proj)) n = add(n, p.out);
  return n;
}

// One layer's tensors per token (models/llama/block.cpp), in bytes.
struct LayerBytes {
  int64_t x = 0;          // the block input
  int64_t attn = 0;       // saved by the attention half, besides x
  int64_t mlp = 0;        // saved by the MLP half
  int64_t down_bwd = 0;   // beside all of it while down_proj's backward runs: the peak of the MLP half
  int64_t attn_bwd = 0;   // beside x + attn while the attention backward runs (the MLP's are gone)
  int64_t attention_tensors = 0;  // of attn: q, k, v, the output and its log-sum-exp
  int64_t qkv_saved = 0;  // of attn: what the q/k/v projections' backward reads (norm stats, bags)
  int64_t grads = 0;      // the attention's gradients beside them: dq, dk, dv, and on a GPU the
                          // flash kernel's fp32 dQ and per-row dot
  int64_t qkv_bwd = 0;    // a tile's q/k/v backward beyond its saved tensors: dh1
  int64_t e_q = 0;        // one attention-output row (one hidden row is x)
  int64_t saved() const { return add(x, attn, mlp); }
  // What a layer's backward adds on top of its saved tensors at its peak.
  int64_t backward_excess() const { return std::max<int64_t>(down_bwd, attn_bwd - mlp); }
  // Checkpointing's backward of a layer (LlamaModel::block_recompute_backward) at T tokens in
  // tiles of t, beside its input: the most of its three phases. The half after the attention,
  // tile by tile, beside the attention tensors, ∂out (then ∂x2 in place) and ∂att; the attention
  // backward beside its gradients; the q/k/v half, tile by tile, beside ∂x2, dq, dk, dv and ∂x.
  // One tile keeps the q/k/v bags of the recompute whole throughout.
  int64_t recompute_backward(int64_t T, int64_t t) const {
    const int64_t bags = t >= T ? qkv_saved : 0;  // whole, or 0 and one tile's beside qkv_bwd
    const int64_t whole = add(attention_tensors, x, e_q, bags);
    const int64_t post = add(mul(T, whole), mul(t, add(mlp, down_bwd - x)));
    const int64_t attention = mul(T, add(whole, grads));
    const int64_t inputs = add(mul(T, add(x, grads, x, bags)), mul(t, add(qkv_saved - bags, qkv_bwd)));
    return std::max({post, attention, inputs});
  }
};

//   x                                                                   e·h
//   attention: rstd1 (fp32), q, k, v, the attention output, its log-sum-exp per head (fp32);
//     the LoRA family's q/k/v input rmsnorm(x); x·Aᵀ of q, k, v, o       e·(2q + 2kv [+ h] + 4r) + 4(1 + heads)
//   MLP: x2 (the residual), rstd2 (fp32), gate, up; the LoRA family's inputs of gate/up
//     (rmsnorm(x2)) and of down (silu(gate)·up); x·Aᵀ of gate, up, down  e·(h + 2i [+ h + i] + 3r) + 4
//   qk_norm (Qwen3): q and k before their per-head norms and the norms' fp32 statistics
//                                                                       e·(q + kv) + 4(heads + kv_heads)
// Backward (block_backward lets each tensor go after its last reader; swiglu's gradients
// overwrite gate and up): down_proj's backward holds the incoming gradient, its dX and LoRA's
// dY·B (e·(h + i + r)); the attention backward holds dx2, the gradient of the attention output,
// dq, dk, dv, and on a GPU the flash kernel's fp32 dQ and per-row dot (4q + 4·heads); with
// qk_norm on the CPU also the reference's copy of dq while it goes back through the norm (e·q;
// the CUDA kernel works in place). Not counted: the flash backward's dK/dV partials where it
// splits a kv head's group over blocks, only on grids too small to fill the GPU (short batches)
// and at most the size of its fp32 dQ.
LayerBytes layer_bytes(const LlamaConfig& c, int64_t r, int64_t e, bool saves_inputs, bool gpu) {
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), i = c.intermediate_size;
  const int64_t qk_norm = c.qk_norm ? add(mul(e, add(q, kv)), mul(kFp32, add(c.num_heads, c.num_kv_heads))) : 0;
  const int64_t qk_norm_grads = c.qk_norm && !gpu ? mul(e, q) : 0;
  LayerBytes b;
  b.x = mul(e, h);
  b.attn = add(mul(e, add(mul(2, q), mul(2, kv), saves_inputs ? h : 0, mul(4, r))),
               mul(kFp32, add(1, c.num_heads)), qk_norm);
  b.mlp = add(mul(e, add(h, mul(2, i), saves_inputs ? add(h, i) : 0, mul(3, r))), kFp32);
  b.attention_tensors = add(mul(e, add(mul(2, q), mul(2, kv))), mul(kFp32, c.num_heads), qk_norm);
  b.qkv_saved = add(mul(e, add(saves_inputs ? h : 0, mul(3, r))), kFp32);
  b.grads = add(mul(e, add(q, mul(2, kv))), gpu ? mul(kFp32, add(q, c.num_heads)) : 0, qk_norm_grads);
  b.qkv_bwd = mul(e, add(h, r));
  b.e_q = mul(e, q);
  b.down_bwd = mul(e, add(h, i, r));
  b.attn_bwd = add(mul(e, add(h, mul(2, q), mul(2, kv))),
                   gpu ? mul(kFp32, add(q, c.num_heads)) : 0, qk_norm_grads);
  return b;
}

}  // namespace

int64_t nf4_dq_bytes(int64_t n) {
  const int64_t blocks = ceil_div(n, 64);
  return add(add(ceil_div(n, 2), blocks), mul(add(ceil_div(blocks, 256), 1), kFp32));
}

int64_t default_loss_chunk_tokens(int64_t vocab) {
  // ~64M logits a chunk (256 MB fp32 + 128 MB bf16 gradient), in whole 128-token tiles: the
  // head's dX GEMM [chunk, V]·[V, hidden] has only chunk/128 · hidden/128 output tiles, so a
  // small chunk (130 tokens at a 128K vocabulary) leaves most of the GPU idle.
  const int64_t n = (int64_t(1) << 26) / std::max<int64_t>(vocab, 1);
  return n >= 128 ? n / 128 * 128 : std::max<int64_t>(1, n);
}

int64_t activation_bytes_per_token_layer(const LlamaConfig& c, int64_t r, int64_t compute_bytes,
                                         bool saves_inputs) {
  return layer_bytes(c, r, compute_bytes, saves_inputs, false).saved();
}

int64_t offloaded_bytes_per_token_layer(const LlamaConfig& c, int64_t compute_bytes) {
  const LayerBytes b = layer_bytes(c, 1, compute_bytes, false, false);
  return add(b.x, b.attention_tensors);
}

bool keeps_attention_in_host(const LlamaConfig& c, int64_t tokens, int64_t compute_bytes,
                             int64_t host_bytes, int host_share) {
  const int64_t need = mul(c.num_layers, tokens, offloaded_bytes_per_token_layer(c, compute_bytes));
  return host_bytes > 0 && need <= host_bytes / 2 / std::max(host_share, 1);
}

namespace {

// The estimate's parts that do not depend on the method, and the method's row turned into an entry.
class Estimator {
 public:
  Estimator(const LlamaConfig& c, const MemoryEstimateOptions& opt) : c_(c), opt_(opt) {
    LOFT_CHECK(opt.batch > 0 && opt.seq > 0 && opt.lora_rank > 0 && opt.logits_chunk_tokens >= 0,
               "memory estimate: batch, seq and rank must be positive");
    r_ = opt.lora_rank;
    T_ = mul(opt.batch, opt.seq);
    e_ = opt.gpu ? 2 : kFp32;
    const int64_t L = c.num_layers, h = c.hidden_size, V = c.vocab_size;
    sizes_ = sizes(c, r_, e_);
    norms_ = add(mul(e_, add(mul(2, L), 1), h), mul(e_, L, family_extras_per_layer(c)));
    table_ = mul(e_, V, h);
    table_on_host_ = opt.gpu && !c.tie_word_embeddings;
    embeddings_ = add(table_on_host_ ? 0 : table_, c.tie_word_embeddings ? 0 : table_);
    // One chunk of fp32 logits (the cross-entropy writes its gradient in place) and, in bf16, the
    // gradient rounded once for the GEMM back to the hidden state.
    const int64_t chunk = opt.logits_chunk_tokens > 0 ? opt.logits_chunk_tokens : default_loss_chunk_tokens(V);
    logits_ = mul(std::min(T_, chunk), V, add(kFp32, e_ < kFp32 ? e_ : 0));
    // The loss head: the last hidden state, its norm, the norm's gradient (then ∂h), fp32 losses
    // and rstd, and one chunk.
    loss_head_ = add(mul(T_, add(mul(3, e_, h), 2 * kFp32)), logits_);
    keeps_attention_ = opt.host_bytes <= 0 || keeps_attention_in_host(c, T_, e_, opt.host_bytes, opt.host_share);
  }

  const ProjectionSizes& projection_sizes() const { return sizes_; }

  // The attention tensors come back from host memory only where the host has room and the device
  // the one layer's worth they add (opt.device_budget); else they are recomputed.
  MethodMemory entry(const MethodMemoryRow& row) const {
    MethodMemory m = entry(row, keeps_attention_);
    if (m.attention_in_host && opt_.device_budget > 0 && m.total() > opt_.device_budget) m = entry(row, false);
    return m;
  }

 private:
  // The projections' resident bytes a rank holds: all of them, or with --shard-backbone its 1/N
  // share and the two slots its layers are gathered into (a layer's bytes each).
  int64_t sharded(int64_t frozen) const {
    const int64_t n = opt_.shard_world;
    if (n <= 1) return frozen;
    const int64_t L = std::max<int64_t>(c_.num_layers, 1);
    return add((frozen + n - 1) / n, mul(2, (frozen + L - 1) / L));
  }

  MethodMemory entry(const MethodMemoryRow& row, bool keeps_attention) const {
    const int64_t L = c_.num_layers;
    const LayerBytes lb = layer_bytes(c_, r_, e_, row.saves_inputs, opt_.gpu);
    MethodMemory m;
    m.method = row.name;
    m.description = row.description;
    m.frozen_weights = add(sharded(row.frozen_bytes), row.scratch_bytes, norms_);
    m.embeddings = embeddings_;
    m.host_embeddings = table_on_host_ ? table_ : 0;
    m.adapter_params = row.trainable;
    const int64_t copies = row.compute_copies && e_ < kFp32 ? e_ : 0;
    m.adapter = mul(add(kTrainableBytesPerParam, row.extra_bytes_per_trainable, copies), row.trainable);
    // Kept through the backward: every layer's saved tensors, or only each block's input
    // (checkpointing), and the batch. At a layer's backward: with checkpointing its recomputed
    // tensors, and what its backward adds.
    // Offloaded (CheckpointOffload): two layers' inputs and attention tensors on the device
    // (LlamaModel::keeps_attention): the last two layers' through the loss head, then the
    // next layer's coming up beside the recomputed layer's, whose attention tensors `working`
    // counts (restored or recomputed, they are the same tensors).
    const bool offloaded = opt_.gpu && opt_.checkpoint_offload;
    const int64_t kept_layers = offloaded ? std::min<int64_t>(L, 2) : L;
    const int64_t kept_per_token =
        !opt_.grad_checkpointing ? mul(L, lb.saved())
        : add(mul(kept_layers, lb.x), offloaded && keeps_attention ? mul(kept_layers - 1, lb.attention_tensors) : 0);
    m.attention_in_host = offloaded && opt_.grad_checkpointing && keeps_attention;
    m.activations = mul(T_, add(kept_per_token, kBatchBytesPerToken));
    // Every layer's input waits in pinned host memory (attention tensors only where the host
    // has room to spare: LlamaModel::keeps_attention).
    m.host_checkpoints = offloaded && opt_.grad_checkpointing ? mul(T_, L, lb.x) : 0;
    const int64_t tile = opt_.token_tile > 0 ? std::min(T_, opt_.token_tile) : T_;
    const int64_t layer = add(opt_.grad_checkpointing ? lb.recompute_backward(T_, tile)
                                                      : mul(T_, lb.backward_excess()),
                              mul(opt_.grad_checkpointing ? tile : T_, row.working_bytes_per_token));
    m.working = std::max(layer, loss_head_);
    m.logits = logits_;
    add(m.frozen_weights, m.embeddings, m.adapter, m.activations, m.working);  // total() fits
    return m;
  }

  const LlamaConfig& c_;
  const MemoryEstimateOptions& opt_;
  int64_t r_ = 0, T_ = 0, e_ = 0;
  ProjectionSizes sizes_;
  int64_t norms_ = 0, table_ = 0, embeddings_ = 0, logits_ = 0, loss_head_ = 0;
  bool table_on_host_ = false;
  bool keeps_attention_ = true;
};

}  // namespace

std::vector<MethodMemory> estimate_training_memory(const LlamaConfig& c,
                                                   const MemoryEstimateOptions& opt) {
  const Estimator est(c, opt);
  std::vector<MethodMemory> out;
  for (const MethodSpec* spec : method_specs())
    for (const MethodMemoryRow& row : spec->memory_rows(est.projection_sizes())) out.push_back(est.entry(row));
  return out;
}

MethodMemory estimate_method_memory(const LlamaConfig& c, const MemoryEstimateOptions& opt,
                                    const MethodOptions& method) {
  const Estimator est(c, opt);
  return est.entry(method_spec(method.method).memory_row(est.projection_sizes(), method));
}

}  // namespace loft::llama
