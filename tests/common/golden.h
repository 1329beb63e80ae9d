// The PyTorch/PEFT golden check (shared/data/golden/README): a LoRA r=8 α=16 model on q,k,v,o,
// gate,up,down, its logits, loss and gradients, then 3 AdamW steps with clipping. Run on the CPU
// backend (f32) by tests/models and on CUDA (bf16) by tests/gpu, with their own tolerances.
#pragma once
#include <string>

#include "engine/tensor/device.h"
#include "engine/tensor/dtype.h"

namespace loft::test {

struct GoldenTolerance {
  double logits, loss, grads, params, losses;
};

// `model` is a folder under models/ ("stories260K-hf"), `golden` a file under golden/. `dtype`
// is the compute dtype (F32 on the CPU; F32 or BF16 on CUDA).
void check_golden_lora(const std::string& model, const std::string& golden, Device device,
                       DType dtype, const GoldenTolerance& tol);

}  // namespace loft::test
