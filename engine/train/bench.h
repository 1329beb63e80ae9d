// Timing of training steps for `loft bench`: warm-up steps, then timed steps on one fixed batch,
// each step bracketed by a device synchronisation so the clock sees the GPU's work, and the
// device's peak allocated memory over the timed steps (weights and optimizer state included).
// A step is exactly the trainer's (train_step.h): forward + backward, the grad norm and its
// clipping, AdamW (zeroing the grads), the method's after_step. After the timed steps, a few more steps run under the
// profiler (engine/device/profile.h) for the per-part breakdown; the timed steps stay unprofiled.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "engine/device/profile.h"
#include "engine/optim/adamw.h"
#include "engine/train/batch.h"

namespace loft {

struct BenchSchedule {
  int64_t warmup = 3;  // steps run first and not timed (kernel selection, allocator warm-up)
  int64_t steps = 8;   // timed steps, >= 1
  int64_t profiled = 2;  // profiled steps after the timed ones, >= 0 (0: no breakdown)
  double lr = 2e-4;
  double max_grad_norm = 0.3;  // clip as finetune does (its default is the method's); <= 0: off
};

struct BenchTimes {
  std::vector<double> step_seconds;  // each timed step, in order
  double median_s = 0, mean_s = 0;
  double tokens_per_s = 0;     // batch tokens / median step time
  int64_t peak_bytes = 0;      // peak allocated on the device during the timed steps
  double last_loss = 0;        // mean loss per target token of the last timed step
  // Seconds per profiled step charged to each part (exhaustive: Other holds what no scope
  // claims), and the wall time per profiled step they add up to. Zero when none were profiled.
  std::array<double, prof::kParts> breakdown_s{};
  double profiled_step_s = 0;
};

// Runs the schedule on `model` with `optimizer` (built over model.params()). Throws Error when a
// step's loss or gradient norm is not finite.
BenchTimes time_training_steps(TrainableModel& model, AdamW& optimizer, const Batch& batch,
                               Device device, const BenchSchedule& schedule);

// Median of a non-empty list (mean of the two middle values for an even count).
double median(std::vector<double> v);

}  // namespace loft
