// A decoder block's parts as LlamaModel's forward and backward run them (models/llama/block.cpp),
// shared by model.cpp (which builds the layers) and block.cpp. Internal to models/llama.
#pragma once
#include <memory>

#include "engine/peft/adapted_linear.h"
#include "models/llama/model.h"

namespace loft::llama {

// Sizes of one block's tensors for T tokens, and where its activations live.
struct LlamaModel::Dims {
  struct Sizes {
    int64_t tokens, hidden, head_dim, heads, kv_heads, ffn;
  } sizes;
  DType dtype;
  Device device;
  Tensor act(Shape s) const { return Tensor::empty(std::move(s), dtype, device); }
  Tensor f32(Shape s) const { return Tensor::empty(std::move(s), DType::F32, device); }
};

struct LlamaModel::Layer {
  Tensor attn_norm, ffn_norm;
  std::unique_ptr<AdaptedLinear> q, k, v, o, gate, up, down;
  // The family's frozen extras (LlamaConfig): each projection's bias by Proj (undefined: none),
  // the per-head q/k norm weights (undefined without qk_norm).
  std::array<Tensor, kNumProj> bias;
  Tensor q_norm, k_norm;
  const Tensor& bias_of(Proj p) const { return bias[size_t(p)]; }
};

// Rows [begin, begin + n) of a block's tokens (block.cpp works over such tiles).
struct Tile {
  int64_t begin, n;
};

// What the backward of the attention half's inputs reads, for one tile of tokens: the block
// input, its norm statistics and the q/k/v projections' bags (which share the normed input).
struct AttentionInputsSaved {
  Tensor x, rstd1;
  LinearSaved sq, sk, sv;
};

// What the backward of the half after the attention reads, for one tile: o's bag, the residual
// x2 with its norm statistics, gate and up before SwiGLU, and the MLP's bags.
struct PostAttentionSaved {
  Tensor x2, rstd2, gate, up;
  LinearSaved so, sgate, sup, sdown;
};

// Everything a block's backward reads without checkpointing: one tile spanning every token.
struct LlamaModel::Saved {
  AttentionInputsSaved in;
  BlockAttention attention;
  PostAttentionSaved post;
};

}  // namespace loft::llama
