// One optimizer step exactly as `loft finetune` takes it; `loft bench` times this same function,
// so its numbers are the trainer's. Steps: forward + backward of each micro-batch with the loss
// scaled by 1 / (target tokens of all of them, as one big batch), the global grad norm (clipped to
// max_grad_norm when > 0), AdamW at lr (the grads consumed: zeroed), then the model's after_step
// (the methods apply the update to their own state and refresh their derived copies). Profile
// parts: the clipping, the update and after_step are charged to Optimizer (FALQON's row update
// inside after_step to its own part).
#pragma once
#include <cstdint>
#include <span>

#include "engine/optim/adamw.h"
#include "engine/train/batch.h"

namespace loft {

struct StepResult {
  double loss_sum = 0;   // Σ −log p over the target tokens of every micro-batch
  int64_t targets = 0;   // target tokens over every micro-batch
  int64_t tokens = 0;    // tokens (ids) over every micro-batch
  double grad_norm = 0;  // the global norm before clipping
};

// `step` (1-based) names the step in errors. Throws Error, before anything is applied to the
// params, when a micro-batch's loss or the gradient norm is not finite.
StepResult train_step(TrainableModel& model, AdamW& optimizer, std::span<const Batch> micro,
                      double max_grad_norm, double lr, int64_t step);

}  // namespace loft
