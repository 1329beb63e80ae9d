// Timing of training steps for `loft bench`: warm-up steps, then timed steps on one fixed batch,
// each step bracketed by a device synchronisation so the clock sees the GPU's work, and the
// device's peak allocated memory over the timed steps (weights and optimizer state included).
// A step is exactly the trainer's (train_step.h): forward + backward, the grad norm and its
// clipping, AdamW (zeroing the grads), the method's after_step. After the timed steps, a few more steps run under the
// profiler (engine/device/profile.h) for the per-part breakdown; the timed steps stay unprofiled.
// The data-parallel version (bench_parallel.h) shares the warm-up and timing loop: time_steps.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/device/profile.h"
#include "engine/optim/adamw.h"
#include "engine/train/batch.h"
#include "engine/train/train_step.h"

namespace loft {

struct BenchSchedule {
  int64_t warmup = 3;  // steps run first and not timed (kernel selection, allocator warm-up)
  int64_t steps = 8;   // timed steps, >= 1
  int64_t profiled = 2;  // profiled steps after the timed ones, >= 0 (0: no breakdown)
  bool profile_ops = false;  // the profiled steps also time each op within its part
  double lr = 2e-4;
  double max_grad_norm = 0.3;  // clip as finetune does (its default is the method's); <= 0: off
};

// Where one rank's data-parallel step goes, mean seconds over the timed steps (bench_parallel.h):
// on its GPU, the forward and backward until the gradients' sum is called (compute_s), the part of
// the sum left after the backward (exposed_sync_s), the clipping, optimizer and after_step
// (after_sync_s), and all of them (gpu_step_s); on the host, the time its thread took to queue the
// forward and backward (host_until_sum_s; close to compute_s when launches hold the GPU back) and
// its whole step until its GPU was done (host_step_s).
struct RankTimes {
  double compute_s = 0, exposed_sync_s = 0, after_sync_s = 0, gpu_step_s = 0;
  double host_until_sum_s = 0, host_step_s = 0;
};

struct BenchTimes {
  std::vector<double> step_seconds;  // each timed step, in order
  double median_s = 0, mean_s = 0;
  int64_t tokens_per_step = 0;  // tokens a step takes (the batch's, times the data-parallel ranks)
  double tokens_per_s = 0;     // tokens_per_step / median step time
  int64_t peak_bytes = 0;      // peak allocated on the device during the timed steps (with
                               // several ranks: the largest of their devices' peaks)
  // Cached blocks the allocator handed back to make room during the timed steps (with several
  // ranks: all of theirs): a run at its memory limit, each return a wait for the GPU.
  int64_t allocator_returns = 0;
  double last_loss = 0;        // mean loss per target token of the last timed step
  // Seconds per profiled step charged to each part (exhaustive: Other holds what no scope
  // claims), and the wall time per profiled step they add up to. Zero when none were profiled.
  std::array<double, prof::kParts> breakdown_s{};
  double profiled_step_s = 0;
  // With profile_ops: per profiled step, each "part/op"'s seconds and calls (prof::op_times).
  std::map<std::string, prof::OpTime> op_breakdown;
  std::vector<RankTimes> ranks;  // a data-parallel bench's, one per rank
};

// Runs the schedule on `model` with `optimizer` (built over model.params()). Throws Error when a
// step's loss or gradient norm is not finite.
BenchTimes time_training_steps(TrainableModel& model, AdamW& optimizer, const ModelBatch& batch,
                               Device device, const BenchSchedule& schedule);

// The loop every bench shares (time_training_steps here, time_parallel_training_steps in
// bench_parallel.h): schedule.warmup untimed steps, then start_timing() (every device
// synchronised, its peak reset), then schedule.steps timed ones. step(n) runs step n (1-based) to
// completion on every device and returns its mean loss per target token. Fills the step times,
// their median and mean, last_loss, tokens_per_step and tokens_per_s; the peak and the breakdown
// are the caller's. Returns the number of steps taken.
int64_t time_steps(const BenchSchedule& schedule, int64_t tokens_per_step,
                   const std::function<double(int64_t step)>& step,
                   const std::function<void()>& start_timing, BenchTimes& t);

// A step's mean loss per target token (0 when it has no target).
double mean_loss(const StepResult& r);

// Median of a non-empty list (mean of the two middle values for an even count).
double median(std::vector<double> v);

}  // namespace loft
