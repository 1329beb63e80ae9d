// A trainable tensor, as the optimizer, the gradient sync and the methods' adapters share it.
#pragma once
#include <string>

#include "engine/tensor/tensor.h"

namespace loft {

// fp32 master value and fp32 gradient (accumulated across micro-batches).
struct Param {
  std::string name;  // e.g. "model.layers.0.self_attn.q_proj.lora_A"
  Tensor value;      // F32
  Tensor grad;       // F32, same shape; zeroed by the trainer after each optimizer step
};

}  // namespace loft
