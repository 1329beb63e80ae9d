// An ESTIMATE of the device memory a Llama fine-tune needs per method, from the architecture
// alone, before anything is allocated (loft info, the plan printed at start). It counts the big
// buffers the methods are defined by (METHODS.md); it does not count the CUDA context, cuBLAS
// workspaces, allocator fragmentation or a layer's transient backward buffers, so real peaks run
// higher (typically by a few hundred MB).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/llama/config.h"

namespace loft::llama {

struct MemoryEstimateOptions {
  int64_t batch = 1;
  int64_t seq = 512;
  int64_t lora_rank = 64;
  int64_t logits_chunk_tokens = 1024;  // chunked cross-entropy: tokens per logits chunk
};

// Bytes per part, for one method.
struct MethodMemory {
  std::string method;          // the method and its weight form: MethodSpec::memory_rows' names
  std::string description;     // how the frozen projections are held
  int64_t frozen_weights = 0;  // the 7 projections in the method's format + RMSNorm weights (bf16)
  int64_t embeddings = 0;      // embed_tokens + lm_head (unless tied), bf16
  int64_t adapter = 0;         // trainable params + grads + AdamW m, v, all fp32 (16 B/param)
  int64_t activations = 0;     // saved for backward, bf16, activation checkpointing off
  int64_t logits = 0;          // one cross-entropy chunk
  int64_t adapter_params = 0;  // trainable parameter count
  int64_t total() const { return frozen_weights + embeddings + adapter + activations + logits; }
};

// Bytes of one tensor of n elements in NF4 with double quantization (bitsandbytes layout):
// n/2 code bytes + one 8-bit absmax per 64-block + one fp32 absmax per 256 blocks + one fp32
// offset = 4.127 bits/param for large n.
int64_t nf4_dq_bytes(int64_t n);

// Activation bytes saved per token per decoder layer (see memory_estimate.cpp for the formula).
int64_t activation_bytes_per_token_layer(const LlamaConfig& cfg, int64_t lora_rank);

// One entry per form each registered method can store W in, in registry order.
std::vector<MethodMemory> estimate_training_memory(const LlamaConfig& cfg,
                                                   const MemoryEstimateOptions& opt);

}  // namespace loft::llama
