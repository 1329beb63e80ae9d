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
  // Optional BF16/F16 copy of value that the forward reads (LoRA's A and B in the compute dtype):
  // the optimizer writes value rounded into it with each update, in the same pass, so no
  // separate conversion follows the step. Undefined: none.
  Tensor copy{};
  // Set by an optimizer step that wrote `copy`, cleared by the owner's after_step(), which
  // refreshes the copy itself when it finds it unset (values set by hand or by another update).
  bool copy_written = false;
};

}  // namespace loft
