// AdamW over a model's trainable Params (fp32 moments beside each), with global grad-norm
// clipping as torch.nn.utils.clip_grad_norm_ does it.
#pragma once
#include <string>
#include <vector>

#include "engine/ops/ops.h"
#include "engine/peft/adapted_linear.h"

namespace loft {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};

class AdamW {
 public:
  AdamW(std::vector<Param*> params, AdamWConfig config);
  // One update of every param at learning rate `lr` (the step counter advances first).
  void step(double lr);
  void zero_grad();
  int64_t steps_taken() const { return step_; }

  // Moments as named tensors ("<param>.exp_avg", "<param>.exp_avg_sq") for checkpoints, and back.
  std::vector<std::pair<std::string, Tensor>> state() const;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors, int64_t steps_taken);

 private:
  std::vector<Param*> params_;
  std::vector<Tensor> m_, v_;
  AdamWConfig config_;
  int64_t step_ = 0;
};

// √(Σ‖grad‖²) over all params.
double grad_norm(const std::vector<Param*>& params);
// Scales every grad by max_norm / (norm + 1e-6) when that is below 1 (torch's clip_grad_norm_).
// Returns the norm before clipping. max_norm <= 0 disables clipping.
double clip_grad_norm(const std::vector<Param*>& params, double max_norm);

}  // namespace loft
