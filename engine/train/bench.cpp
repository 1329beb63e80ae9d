#include "engine/train/bench.h"

#include "engine/train/train_step.h"
#include "engine/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace loft {

namespace {

// One step as finetune takes it (train_step.h), on the bench batch as its one micro-batch; returns
// the mean loss per target token.
double bench_step(TrainableModel& model, AdamW& optimizer, const Batch& batch,
                  const BenchSchedule& schedule, int64_t step) {
  const StepResult r = train_step(model, optimizer, std::span<const Batch>(&batch, 1),
                                  schedule.max_grad_norm, schedule.lr, step);
  return r.targets > 0 ? r.loss_sum / double(r.targets) : 0.0;
}

}  // namespace

double median(std::vector<double> v) {
  LOFT_CHECK(!v.empty(), "median of an empty list");
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  return (upper + *std::max_element(v.begin(), v.begin() + mid)) / 2;
}

BenchTimes time_training_steps(TrainableModel& model, AdamW& optimizer, const Batch& batch,
                               Device device, const BenchSchedule& schedule) {
  LOFT_CHECK(schedule.steps >= 1 && schedule.warmup >= 0 && schedule.profiled >= 0, "bench: ",
             schedule.steps, " timed steps after ", schedule.warmup, " warm-up steps, ",
             schedule.profiled, " profiled");
  using Clock = std::chrono::steady_clock;
  BenchTimes t;
  int64_t step = 0;
  // The method's calibration pass (if any), on the bench batch, as finetune runs it.
  run_calibration(model, [&batch]() -> std::optional<Batch> { return batch; });
  for (; step < schedule.warmup; ++step)
    bench_step(model, optimizer, batch, schedule, step + 1);
  synchronize(device);
  reset_peak_memory(device);
  for (int64_t i = 0; i < schedule.steps; ++i, ++step) {
    const auto start = Clock::now();
    t.last_loss = bench_step(model, optimizer, batch, schedule, step + 1);
    synchronize(device);
    t.step_seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  t.peak_bytes = int64_t(memory_stats(device).peak_allocated);
  t.median_s = median(t.step_seconds);
  t.mean_s = std::accumulate(t.step_seconds.begin(), t.step_seconds.end(), 0.0) /
             double(t.step_seconds.size());
  t.tokens_per_s = t.median_s > 0 ? double(batch.ids.numel()) / t.median_s : 0.0;
  if (schedule.profiled == 0) return t;

  const auto start = Clock::now();
  prof::start(device);
  try {
    for (int64_t i = 0; i < schedule.profiled; ++i, ++step)
      bench_step(model, optimizer, batch, schedule, step + 1);
  } catch (...) {
    try {
      prof::stop();  // leave the profiler off for whoever runs next
    } catch (...) {  // the step's own error is the one to report
    }
    throw;
  }
  const std::array<double, prof::kParts> parts = prof::stop();
  const double n = double(schedule.profiled);
  t.profiled_step_s = std::chrono::duration<double>(Clock::now() - start).count() / n;
  for (int p = 0; p < prof::kParts; ++p) t.breakdown_s[size_t(p)] = parts[size_t(p)] / n;
  return t;
}

}  // namespace loft
