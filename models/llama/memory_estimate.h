// An ESTIMATE of the device memory a Llama fine-tune's step peaks at, per method, from the
// architecture alone, before anything is allocated (loft info, finetune's plan, loft bench's "est."
// column). It follows what LlamaModel::forward_backward allocates (models/llama/model.cpp): the
// frozen weights as each method stores them, the adapter state, what the forward keeps for the
// backward (every layer's saved tensors, or with grad checkpointing only each block's input), and
// the most the step adds on top at once: one layer's recomputed activations with the gradient
// buffers of its backward, or the loss head with one logits chunk. It does not count the CUDA
// context, cuBLAS workspaces, allocator rounding or a method's small per-product temporaries
// (quantized copies of an input), so measured peaks run a little higher.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/peft/method.h"
#include "models/llama/config.h"

namespace loft::llama {

// Tokens per tile by default (LlamaModel::set_token_tile): every training shape measured before
// tiling (at most 8192 tokens per micro-batch) runs untiled; at 128k tokens of llama3-8b a tile's
// MLP intermediates take 224 MiB each instead of 3.5 GiB.
constexpr int64_t kDefaultTokenTile = 8192;

struct MemoryEstimateOptions {
  int64_t batch = 1;
  int64_t seq = 512;
  int64_t lora_rank = 64;
  bool grad_checkpointing = false;
  // With checkpointing on a GPU, the block inputs wait in pinned host memory (CheckpointOffload):
  // at most two are on the device at a time (one coming up while another is used).
  bool checkpoint_offload = true;
  // Training on a GPU: bf16 weights and activations, the embedding table in host memory unless
  // tied (embedding_in_host_memory). False: the CPU's f32, where host memory is the device's.
  bool gpu = true;
  int64_t logits_chunk_tokens = 0;  // tokens per logits chunk; 0: as the model picks
  int64_t token_tile = kDefaultTokenTile;  // LlamaModel::set_token_tile; 0: no tiling
  // The host's RAM, which decides whether offloaded attention tensors come back to the device
  // (keeps_attention_in_host); 0: unknown, counted as if they do (the larger estimate).
  int64_t host_bytes = 0;
  // Replicas on this host (data parallel), which share host_bytes as LlamaModel's
  // set_host_memory_share says.
  int host_share = 1;
  // --shard-backbone over this many ranks (engine/parallel/sharded_backbone.h): each keeps 1/N
  // of the frozen projections' bytes and two layers' worth gathered (1: not sharded).
  int shard_world = 1;
  // The device memory the run may use (a card or --gpu-memory-limit, less what the CUDA context
  // holds); where restoring the attention tensors would take the peak past it, they are
  // recomputed instead (MethodMemory::attention_in_host). 0: no bound.
  int64_t device_budget = 0;
};

// Bytes per part, for one method.
struct MethodMemory {
  std::string method;          // the method and its weight form: MethodSpec::memory_row's name
  std::string description;     // how the frozen projections are held
  int64_t frozen_weights = 0;  // the 7 projections in the method's format + RMSNorm weights (and
                               // a family's biases and q/k norm weights)
  int64_t embeddings = 0;      // on the device: lm_head, and embed_tokens where it is there
  int64_t host_embeddings = 0; // embed_tokens in host memory (not in total())
  int64_t host_checkpoints = 0; // offloaded block inputs in pinned host memory (not in total())
  int64_t adapter = 0;         // trainable params + grads + AdamW m, v (16 B/param) + copies
  int64_t activations = 0;     // kept by the forward for the backward (checkpointing: inputs)
  int64_t working = 0;         // the most added on top at once (a layer's backward, or the loss head)
  int64_t logits = 0;          // one logits chunk (part of `working` when the loss head is larger)
  int64_t adapter_params = 0;  // trainable parameter count
  // With checkpointing offloaded: the attention tensors wait in host memory beside the block
  // inputs and come back for the backward (LlamaModel::set_attention_in_host); false: recomputed.
  bool attention_in_host = false;
  int64_t total() const { return frozen_weights + embeddings + adapter + activations + working; }
  // What the run pins in host memory: the offloaded block inputs and the embedding table.
  int64_t host_pinned() const { return host_checkpoints + host_embeddings; }
};

// Bytes of one tensor of n elements in NF4 with double quantization (bitsandbytes layout):
// n/2 code bytes + one 8-bit absmax per 64-block + one fp32 absmax per 256 blocks + one fp32
// offset = 4.127 bits/param for large n.
int64_t nf4_dq_bytes(int64_t n);

// Rows of logits the loss head materialises at once by default (~64M logits per chunk, whole 128-token tiles).
int64_t default_loss_chunk_tokens(int64_t vocab);

// Bytes a decoder layer's forward saves for its backward per token, everything included (the
// block input too), for a method that saves each projection's input (the LoRA family) or not
// (FALQON: only x·Aᵀ). `compute_bytes`: 2 (bf16) or 4 (f32).
int64_t activation_bytes_per_token_layer(const LlamaConfig& cfg, int64_t lora_rank,
                                         int64_t compute_bytes = 2, bool saves_inputs = true);

// Bytes per token a decoder layer hands to CheckpointOffload when it keeps its attention tensors
// too: the block input, q, k, v, the attention output (compute dtype) and the fp32 log-sum-exp
// (with qk_norm also q and k before their norms and the norms' statistics).
int64_t offloaded_bytes_per_token_layer(const LlamaConfig& cfg, int64_t compute_bytes = 2);

// Whether a checkpointed step of `tokens` keeps each block's attention tensors in host memory
// beside its input (LlamaModel::keeps_attention): when every layer's take at most half of
// `host_bytes` / `host_share` (the replicas of a data-parallel process share the host).
bool keeps_attention_in_host(const LlamaConfig& cfg, int64_t tokens, int64_t compute_bytes,
                             int64_t host_bytes, int host_share = 1);

// The most a run may pin of a host with `host_bytes` of RAM: 3/4 (pinned pages cannot be swapped
// out; the rest is left to the system, the data loader and the checkpoint files' page cache).
inline int64_t pinned_host_limit(int64_t host_bytes) { return host_bytes / 4 * 3; }
// Whether `pinned` bytes stay within that limit (host_bytes 0: unknown, yes).
inline bool pinned_fits_host(int64_t pinned, int64_t host_bytes) {
  return host_bytes <= 0 || pinned <= pinned_host_limit(host_bytes);
}

// One entry per form each registered method can store W in, in registry order.
std::vector<MethodMemory> estimate_training_memory(const LlamaConfig& cfg,
                                                   const MemoryEstimateOptions& opt);
// The entry of the form `method` trains with (its spec's memory_row); UsageError for an unknown
// method. `opt.lora_rank` is the rank the estimate uses, whatever `method.lora` says.
MethodMemory estimate_method_memory(const LlamaConfig& cfg, const MemoryEstimateOptions& opt,
                                    const MethodOptions& method);

}  // namespace loft::llama
