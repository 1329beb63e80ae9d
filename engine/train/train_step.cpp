#include "engine/train/train_step.h"

#include <cmath>

#include "engine/device/profile.h"

namespace loft {

StepResult train_step(TrainableModel& model, AdamW& optimizer, std::span<const Batch> micro,
                      double max_grad_norm, double lr, int64_t step) {
  StepResult r;
  for (const Batch& b : micro) {
    r.targets += b.target_count;
    r.tokens += b.ids.numel();
  }
  // Normalise by the target tokens of the whole accumulated batch, as one big batch would.
  const float scale = r.targets > 0 ? 1.0f / float(r.targets) : 0.0f;
  for (size_t k = 0; k < micro.size(); ++k) {
    const LossSums s = model.forward_backward(micro[k], scale);
    if (!std::isfinite(s.loss_sum))
      throw Error(cat("step ", step, ": loss is ", s.loss_sum, " in micro-batch ", k + 1, " of ",
                      micro.size(), "; nothing from this step was applied or saved"));
    r.loss_sum += s.loss_sum;
  }
  r.grad_norm = optimizer.clip_grad_norm(max_grad_norm);
  if (!std::isfinite(r.grad_norm))
    throw Error(cat("step ", step, ": gradient norm is ", r.grad_norm,
                    "; nothing from this step was applied or saved"));
  optimizer.step(lr);
  prof::Scope update(prof::Part::Optimizer);  // refreshing derived copies applies the update
  model.after_step();
  return r;
}

}  // namespace loft
