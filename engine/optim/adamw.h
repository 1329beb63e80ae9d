// AdamW over a model's trainable Params (fp32 moments beside each), with global grad-norm
// clipping as torch.nn.utils.clip_grad_norm_ does it. On CUDA the norm, the clip factor and the
// update each run as one launch over all the params (engine/ops/cuda/multi_tensor_optim.cu); the
// norm's copy to the host is the step's only wait.
#pragma once
#include <string>
#include <vector>

#include "engine/ops/ops.h"
#include "engine/tensor/param.h"

namespace loft {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};

class AdamW {
 public:
  AdamW(std::vector<Param*> params, AdamWConfig config);
  // √(Σ‖grad‖²) over every param's grad, before clipping. With max_norm > 0 (and a finite norm)
  // the next step() scales each grad by max_norm / (norm + 1e-6) where that is below 1, as it
  // reads it; max_norm <= 0 only measures.
  double clip_grad_norm(double max_norm);
  // One update of every param at learning rate `lr` (the step counter advances first), from its
  // grad (clipped as the last clip_grad_norm asked), then every grad is zeroed: they are consumed.
  // A param's Param::copy, where it has one, is written in the same pass and marked copy_written.
  void step(double lr);
  int64_t steps_taken() const { return step_; }

  // Moments as named tensors ("<param>.exp_avg", "<param>.exp_avg_sq") for checkpoints, and back.
  std::vector<std::pair<std::string, Tensor>> state() const;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors, int64_t steps_taken);

 private:
  void refresh_lists();

  std::vector<Param*> params_;
  ops::AdamWTensors tensors_;  // the params', grads' and moments' storage, as the ops take them
  Tensor grad_scale_;          // F32 [1] on the params' device: the clip factor for the next step
  bool clip_pending_ = false;  // clip_grad_norm set grad_scale_ for the next step
  AdamWConfig config_;
  int64_t step_ = 0;
};

}  // namespace loft
