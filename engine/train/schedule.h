// Learning-rate schedules as Hugging Face's get_*_schedule_with_warmup define them: the rate for
// optimizer step s (counted from 0) is base_lr · factor(s).
#pragma once
#include <cstdint>
#include <string>

namespace loft {

enum class ScheduleKind { Constant, Linear, Cosine };
ScheduleKind parse_schedule(const std::string& name);  // UsageError on an unknown name

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::Constant;
  double base_lr = 2e-4;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  // Rate for optimizer step `step` (0-based): linear warm-up from 0, then constant, linear decay
  // to 0 at total_steps, or half-cosine decay to 0.
  double lr(int64_t step) const;
};

}  // namespace loft
