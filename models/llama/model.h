// The Llama decoder with explicit forward and backward (no autograd), as llm.c does: each block's
// forward saves what its backward consumes. Frozen projections are AdaptedLinears built by the
// method's factory; the rest of the model (embeddings, norms, lm_head) stays frozen.
#pragma once
#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/device/checkpoint_offload.h"
#include "engine/parallel/sharded_backbone.h"
#include "engine/peft/adapted_linear.h"
#include "engine/train/batch.h"
#include "models/llama/config.h"
#include "models/llama/memory_estimate.h"
#include "models/llama/weights.h"

namespace loft::llama {

// A block's attention tensors as block_backward reads them: q and k rotated, v, the attention
// output and its log-sum-exp; with LlamaConfig::qk_norm also q and k before their per-head norm
// and the norms' statistics.
struct BlockAttention {
  Tensor q, k, v, att, lse;
  Tensor q_in, k_in, q_rstd, k_rstd;  // qk_norm only
  static constexpr size_t kMaxTensors = 9;
  // The ones a model keeps, in this order (CheckpointOffload stores and fetches them as items
  // 1..n): the first five, and the four of qk_norm where it has it.
  std::vector<Tensor*> tensors(bool qk_norm) {
    std::vector<Tensor*> out{&q, &k, &v, &att, &lse};
    if (qk_norm) out.insert(out.end(), {&q_in, &k_in, &q_rstd, &k_rstd});
    return out;
  }
};
struct AttentionInputsSaved;
struct PostAttentionSaved;
struct Tile;

class LlamaModel : public TrainableModel {
 public:
  // Weights must already be in the compute dtype on the compute device (F32 on CPU, BF16 on
  // CUDA). For each of the 7 projections of each layer, `factory` is asked for an AdaptedLinear.
  // With `shard`, the backbone is sharded layer by layer as it is built (shard_backbone).
  LlamaModel(LlamaConfig config, LlamaWeights weights, const LinearFactory& factory,
             ShardGather* shard = nullptr);
  ~LlamaModel() override;

  // Forward + backward of one micro-batch: adds grad_scale · ∂(Σ losses)/∂θ into every Param's
  // grad and returns the unscaled loss sum. The trainer passes grad_scale = 1 / (target tokens of
  // the whole accumulated batch).
  LossSums forward_backward(const ModelBatch& batch, float grad_scale) override;
  // Forward only: loss sums (eval, perplexity).
  LossSums evaluate(const ModelBatch& batch) override;
  // Forward only: logits [T, vocab] in F32 on the CPU (tests, scoring of short inputs).
  Tensor logits(const ModelBatch& batch);

  // ---- inference hooks (KV-cache decoding: models/llama/decode.h) ----
  // One layer's attention at inference: q [T, Hq, D], k, v [T, Hkv, D] (q and k rotated) ->
  // out [T, Hq, D]. The decoder writes k, v into its cache and attends there.
  using Attend = std::function<void(int layer, const Tensor& q, const Tensor& k, const Tensor& v,
                                    Tensor& out)>;
  // Embedding and every block for tokens ids [T] at RoPE positions [T] (I32, model's device),
  // each projection through its AdaptedLinear's forward with nothing saved, attention by
  // `attend`. Returns the last hidden state [T, H] before the final norm.
  Tensor forward_hidden(const Tensor& ids, const Tensor& positions, const Attend& attend);
  // Final norm + lm_head of hidden rows [R, H]: logits [R, vocab] F32 on the model's device.
  Tensor head_logits(const Tensor& hidden);

  std::vector<Param*> params() override;
  // The hook gets layer l's params right after block_backward(l): every method's adapter
  // gradients are written by its projections' backward, nothing after (tests/models/
  // test_grad_ready.cpp checks each). The rest of the model is frozen, so nothing is left for
  // the end of the backward.
  void set_grad_ready_hook(GradReadyHook hook) override { grad_ready_ = std::move(hook); }
  // The layers' params from the last layer to the first (the backward's order).
  std::vector<Param*> grad_order() override;
  void after_step() override;
  void refresh_copies() override;
  int64_t calibration_batches() const override;
  void start_calibration() override;
  void finish_calibration() override;
  // Every projection's method state as "<module>.<key>" (engine/peft/method_state.h). With
  // sharded codes that the method's state reads (FALQON's rows), the copy gather_method_state()
  // made since the last step; Error without one.
  std::map<std::string, Tensor> method_state() const override;
  // With such sharded codes, collects the method state layer by layer, each gathered: every rank
  // calls it at the same point (a collective, skipped when this step's state is gathered already);
  // method_state() then returns it. Else nothing.
  void gather_method_state() override;
  void load_method_state(const std::map<std::string, Tensor>& state,
                         const std::string& source) override;
  // The adapted projections with their Hugging Face module names
  // ("model.layers.0.self_attn.q_proj").
  const std::vector<std::pair<std::string, AdaptedLinear*>>& linears() const { return named_; }

  const LlamaConfig& config() const { return config_; }
  Device device() const { return weights_.final_norm.device(); }
  DType compute_dtype() const { return weights_.final_norm.dtype(); }
  // Keep only block inputs in forward and re-run each block's forward before its backward.
  void set_grad_checkpointing(bool on) { checkpointing_ = on; }
  // With checkpointing on a GPU, the block inputs wait in pinned host memory (CheckpointOffload)
  // unless this is off: the default, true, costs no time when the copies hide behind compute.
  // Where the host has the room (keeps_attention), each block's attention tensors wait there
  // too, so the recompute before its backward skips the q/k/v products and the attention.
  void set_checkpoint_offload(bool on) { offload_on_ = on; }
  // Replicas of a data-parallel run in one process share the host: each keeps attention tensors
  // only within its 1/n of the budget (keeps_attention).
  void set_host_memory_share(int n) { host_share_ = std::max(1, n); }
  // False: the attention tensors are recomputed even where the host has room for them, because
  // the device has not for the one layer's worth they bring back (the plan's estimate decides:
  // MethodMemory::attention_in_host).
  void set_attention_in_host(bool allowed) { attention_in_host_ = allowed; }
  // Tokens per tile of a block's row-wise work (norms, projections, MLP) wherever nothing is
  // saved whole for the backward: the checkpointed forward, its recompute and backward, and
  // inference; 0: no tiling. A positive multiple of ops::kGemmRowBlock, so that on the CPU a
  // tiled step equals the untiled one bit for bit (engine/ops/cpu/gemm_cpu.cpp). Contexts of at
  // most one tile run exactly as untiled on every backend.
  void set_token_tile(int64_t tokens);
  int64_t token_tile() const { return token_tile_; }
  // --shard-backbone (engine/parallel/sharded_backbone.h): from now on this rank keeps 1/N of
  // every layer's frozen codes (N = gather's world) and gathers a layer's codes through `gather`
  // before the layer runs. Results stay bit for bit the unsharded model's. Throws Error naming the
  // first projection whose method's store cannot be sharded.
  void shard_backbone(ShardGather& gather);
  const ShardedBackbone* backbone_shards() const { return shards_.get(); }

 private:
  // Sharded, with projections that write their sharded tensors (AdaptedLinear::
  // writes_sharded_tensors): updates, method state and its restore then go layer by layer.
  bool writes_shards() const;
  // Layer l's kNumProj projections with their module names.
  std::vector<std::pair<std::string, AdaptedLinear*>> layer_linears(size_t l) const;
  // fn(l) for every layer with its codes gathered (whole on this rank); `written`: fn wrote them
  // (alike on every rank) and this rank's share is kept.
  void each_layer_gathered(const std::function<void(size_t)>& fn, bool written);
  struct Layer;
  struct Saved;
  struct Dims;
  Dims dims_for(const Tensor& activations) const;
  // One block over x [T, H] into out. With `saved` (training without checkpointing) it keeps
  // what block_backward reads, as one tile; `keep` receives the attention tensors (the
  // checkpointed forward hands them to host memory). Attention by ops::attention over b's rows
  // and documents, or by `attend_at` when given.
  void block_forward(int l, const Tensor& x, Tensor& out, const ModelBatch& b, Saved* saved,
                     const Attend* attend_at = nullptr, BlockAttention* keep = nullptr);
  // Whether this step's checkpointed forward keeps the attention tensors in host memory beside
  // the block inputs: when they and the inputs of every layer take at most half the host's RAM.
  bool keeps_attention(int64_t tokens) const;
  // dx: ∂loss/∂(block output) in, ∂loss/∂(block input) out. Lets go of each saved tensor as soon
  // as its last reader is done.
  void block_backward(int l, Saved& saved, const ModelBatch& b, Tensor& dx);
  // Checkpointing's backward of block l from its input x: the attention again (or `restored`
  // from host memory), then tile by tile the half after it recomputed and back-propagated, the
  // attention's backward, and tile by tile the q/k/v half's.
  void block_recompute_backward(int l, const Tensor& x, const BlockAttention* restored,
                                const ModelBatch& b, Tensor& dx);
  // The block's parts (models/llama/block.cpp). attention_inputs: rmsnorm and q, k, v of a tile
  // into q, k, v (null: only what their backward reads goes to `saved`). post_attention: o, the
  // residual and the MLP of a tile into out (null: a recompute, out is not needed).
  void attention_inputs(Layer& L, const Tensor& x, Tensor* q, Tensor* k, Tensor* v,
                        AttentionInputsSaved* saved);
  void post_attention(Layer& L, const Tensor& x, const Tensor& att, Tensor* out,
                      PostAttentionSaved* saved);
  // dout: ∂loss/∂(block output) of a tile in, ∂loss/∂x2 out; writes ∂loss/∂att into datt.
  void post_attention_backward(Layer& L, PostAttentionSaved& saved, Tensor& dout, Tensor& datt);
  // dq's and dk's amax (ops.h's *_amax outputs) for q and k when they take them
  // (AdaptedLinear::takes_amax); undefined otherwise.
  struct QkAmax {
    Tensor q, k;
  };
  void attention_inputs_backward(Layer& L, AttentionInputsSaved& saved, const Tensor& dq,
                                 const Tensor& dk, const Tensor& dv, const Tensor& dx2, Tensor& dx,
                                 const QkAmax& amax = {});
  // The per-head q/k norms (qk_norm) and RoPE on q and k [T, heads·D], then the attention over
  // every token into a.
  void attend(int l, const Tensor& q, const Tensor& k, const Tensor& v, const ModelBatch& b,
              const Attend* attend_at, BlockAttention& a);
  // attention_inputs of every tile of x into whole q, k, v (into `saved` too, for one tile),
  // then attend: the attention tensors of block l in a.
  void tiled_attention(int l, const Tensor& x, const std::vector<Tile>& tiles, const ModelBatch& b,
                       const Attend* attend_at, AttentionInputsSaved* saved, BlockAttention& a);
  // The attention's backward with RoPE's (and the q/k norms') of block l: dq, dk, dv
  // [T, heads·D] are made here, and with `amax` dq's and dk's amaxes.
  void attention_backward(int l, const BlockAttention& a, const Tensor& datt, const ModelBatch& b,
                          Tensor& dq, Tensor& dk, Tensor& dv, QkAmax* amax = nullptr);
  // `b` with its doc_start narrowed to the config's sliding window (models/llama/sliding_window.h),
  // or `b` itself without one: what every attention of a batch reads.
  ModelBatch windowed(const ModelBatch& b) const;
  // The tile length for T tokens: token_tile_, or T when that is shorter (or tiling is off).
  int64_t tile_for(int64_t tokens) const;
  // The params of layer l's projections.
  std::vector<Param*> layer_params(size_t l);
  // What layer l's projections shard (AdaptedLinear::sharded_tensors); Error naming a projection
  // that names none.
  std::vector<Tensor*> layer_stored_tensors(size_t l);
  // Before layer l runs: its frozen codes gathered when the backbone is sharded, and `next`'s
  // (or -1) on the way.
  void layer_codes(int l, int next) {
    if (shards_) shards_->use(l, next);
  }
  // The batch's rows of the embedding table [T, H] on the device: a lookup there, or, for a table
  // in host memory (embedding_in_host_memory), the same lookup reading it over PCIe.
  Tensor embed(const ModelBatch& b);
  // Embedding and every block without saving anything: the last hidden state [T, H].
  Tensor forward_hidden(const ModelBatch& b, const Attend* attend = nullptr);
  // Final norm + lm_head + cross-entropy over chunks; with dh, writes ∂loss/∂h_last into it.
  LossSums loss_head(const Tensor& h, const ModelBatch& b, Tensor* dh, float grad_scale);

  LlamaConfig config_;
  LlamaWeights weights_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::pair<std::string, AdaptedLinear*>> named_;
  Tensor inv_freq_;
  Tensor table_mapped_;  // a host table's page-locked copy as the GPU addresses it (embed)
  bool checkpointing_ = false;
  bool offload_on_ = true;
  int host_share_ = 1;
  bool attention_in_host_ = true;
  int64_t token_tile_ = kDefaultTokenTile;
  std::unique_ptr<CheckpointOffload> offload_;  // made on the first checkpointed GPU step
  GradReadyHook grad_ready_;
  std::unique_ptr<ShardedBackbone> shards_;
  std::map<std::string, Tensor> gathered_state_;  // gather_method_state's (writes_shards only)
  bool state_gathered_ = false;                   // and still this step's
};

}  // namespace loft::llama
