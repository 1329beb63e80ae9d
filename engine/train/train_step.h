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
#include <vector>

#include "engine/optim/adamw.h"
#include "engine/parallel/gradient_sync.h"
#include "engine/train/batch.h"

namespace loft {

struct StepResult {
  double loss_sum = 0;   // Σ −log p over the target tokens of every micro-batch (of every rank's, with RankStep)
  int64_t targets = 0;   // target tokens over every micro-batch (of every rank's, with RankStep)
  int64_t tokens = 0;    // tokens (ids) over every micro-batch (this rank's)
  double grad_norm = 0;  // the global norm before clipping
};

// One rank's part of a data-parallel step: `micro` is its share of the step's micro-batches
// (rank_share), the loss scale is 1 / the whole step's target tokens over every rank, and the
// gradients are summed over the ranks before the clipping. The sync is told which gradients are
// final during the last micro-batch's backward, so it may overlap the sum with the rest of it.
struct RankStep {
  GradientSync* sync = nullptr;
  int64_t step_targets = 0;  // target tokens of the step's micro-batches over every rank
};

// `step` (1-based) names the step in errors. Throws Error, before anything is applied to the
// params, when a micro-batch's loss or the gradient norm is not finite. With `rank`, the losses
// are checked only after the gradients were summed, so every rank reaches the collective before
// any of them can throw; the loss is summed with the gradients, so a bad loss on any rank (or a bad
// gradient, through the norm) makes every rank throw the same way.
StepResult train_step(TrainableModel& model, AdamW& optimizer, std::span<const ModelBatch> micro,
                      double max_grad_norm, double lr, int64_t step,
                      const RankStep* rank = nullptr);

}  // namespace loft
