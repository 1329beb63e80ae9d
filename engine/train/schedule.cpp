#include "engine/train/schedule.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"

namespace loft {

ScheduleKind parse_schedule(const std::string& name) {
  if (name == "constant") return ScheduleKind::Constant;
  if (name == "linear") return ScheduleKind::Linear;
  if (name == "cosine") return ScheduleKind::Cosine;
  throw UsageError(cat("--schedule: '", name, "' is not constant, linear or cosine"));
}

double LrSchedule::lr(int64_t step) const {
  if (step < warmup_steps) return base_lr * double(step) / double(std::max<int64_t>(1, warmup_steps));
  if (kind == ScheduleKind::Constant) return base_lr;
  const double progress = double(step - warmup_steps) /
                          double(std::max<int64_t>(1, total_steps - warmup_steps));
  if (kind == ScheduleKind::Linear) return base_lr * std::max(0.0, 1.0 - progress);
  return base_lr * std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * progress)));
}

}  // namespace loft
