#include "engine/train/train_step.h"

#include <cmath>
#include <vector>

#include "engine/device/profile.h"

namespace loft {

namespace {
// Takes the hook off the model however the backward ends (it points at this step's sync).
struct UnsetHook {
  TrainableModel* model;
  ~UnsetHook() {
    if (model) model->set_grad_ready_hook({});
  }
};
}  // namespace

StepResult train_step(TrainableModel& model, AdamW& optimizer, std::span<const ModelBatch> micro,
                      double max_grad_norm, double lr, int64_t step, const RankStep* rank) {
  StepResult r;
  for (const ModelBatch& b : micro) {
    r.targets += b.target_count;
    r.tokens += b.ids.numel();
  }
  if (rank) {
    LOFT_CHECK(rank->sync && rank->step_targets >= r.targets, "step ", step, ": a rank's step needs ",
               "its gradient sync and the step's target count over every rank (", rank->step_targets,
               ", this rank's ", r.targets, ")");
    r.targets = rank->step_targets;
  }
  GradientSync* sync = rank ? rank->sync : nullptr;
  // Normalise by the target tokens of the whole accumulated batch, as one big batch would.
  const float scale = r.targets > 0 ? 1.0f / float(r.targets) : 0.0f;
  std::vector<double> losses;
  const auto check_loss = [&](size_t k) {
    if (!std::isfinite(losses[k]))
      throw Error(cat("step ", step, ": loss is ", losses[k], " in micro-batch ", k + 1, " of ",
                      micro.size(), "; nothing from this step was applied or saved"));
  };
  if (sync) sync->begin(model.grad_order());
  for (const ModelBatch& b : micro) {
    // The last micro-batch's backward tells the sync which gradients are final.
    const bool last = sync && &b == &micro.back();
    if (last) model.set_grad_ready_hook([sync](std::span<Param* const> p) { sync->ready(p); });
    const UnsetHook unset{last ? &model : nullptr};
    losses.push_back(model.forward_backward(b, scale).loss_sum);
    if (!sync) check_loss(losses.size() - 1);  // one rank: stop at the first bad micro-batch
    r.loss_sum += losses.back();
  }
  if (sync) {
    // The loss travels as fp32 hi + lo so the sum keeps about double precision.
    const float hi = float(r.loss_sum);
    float scalars[2] = {hi, float(r.loss_sum - double(hi))};
    sync->sum(model.params(), scalars);
    for (size_t k = 0; k < losses.size(); ++k) check_loss(k);
    r.loss_sum = double(scalars[0]) + double(scalars[1]);
    if (!std::isfinite(r.loss_sum))
      throw Error(cat("step ", step, ": the loss summed over the ranks is ", r.loss_sum,
                      " (another rank's micro-batch); nothing from this step was applied or saved"));
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
