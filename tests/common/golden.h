// The PyTorch/PEFT golden check (golden/ in tests/data/README.md): a LoRA r=8 α=16 model on q,k,v,o,
// gate,up,down, its logits, loss and gradients, then 3 AdamW steps (lr 1e-3, clip 1.0). Run on the
// CPU backend (f32) by tests/models and on CUDA (f32 and bf16) by tests/gpu.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft::test {

struct GoldenTolerance {
  double logits, loss, grads, params, losses;
};

// Everything the check compares, keyed by PEFT module name + ".A"/".B".
struct GoldenRun {
  Tensor logits;
  double loss = 0;
  std::map<std::string, Tensor> grad, step1, step3;
  std::vector<float> losses, norms;
};

// The values PyTorch/PEFT computed (golden/<file>).
GoldenRun golden_from_file(const std::string& golden);
// The same computation by loft: model folder under models/, adapters and batch from golden/<file>,
// compute `dtype` on `device`. With bf16_frozen_weights the frozen weights are rounded to bf16
// first (so a CPU f32 run shows what bf16 weight storage alone changes).
GoldenRun golden_from_loft(const std::string& model, const std::string& golden, Device device,
                           DType dtype, bool bf16_frozen_weights = false);
// The largest relative error of a LoRA gradient of `got` against the same one of `want`.
double worst_grad_error(const GoldenRun& got, const GoldenRun& want);
// Every value of `got` against `want`, relative to each tensor's norm.
void expect_golden_match(const GoldenRun& got, const GoldenRun& want, const GoldenTolerance& tol,
                         const std::string& what);

// golden_from_loft vs golden_from_file.
void check_golden_lora(const std::string& model, const std::string& golden, Device device,
                       DType dtype, const GoldenTolerance& tol);

}  // namespace loft::test
