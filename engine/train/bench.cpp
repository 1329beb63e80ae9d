#include "engine/train/bench.h"

#include "engine/train/train_step.h"
#include "engine/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace loft {

namespace {

// One step as finetune takes it (train_step.h), on the bench batch as its one micro-batch.
double bench_step(TrainableModel& model, AdamW& optimizer, const ModelBatch& batch,
                  const BenchSchedule& schedule, int64_t step) {
  return mean_loss(train_step(model, optimizer, std::span<const ModelBatch>(&batch, 1),
                              schedule.max_grad_norm, schedule.lr, step));
}

}  // namespace

double mean_loss(const StepResult& r) {
  return r.targets > 0 ? r.loss_sum / double(r.targets) : 0.0;
}

double median(std::vector<double> v) {
  LOFT_CHECK(!v.empty(), "median of an empty list");
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  return (upper + *std::max_element(v.begin(), v.begin() + mid)) / 2;
}

int64_t time_steps(const BenchSchedule& schedule, int64_t tokens_per_step,
                   const std::function<double(int64_t step)>& step,
                   const std::function<void()>& start_timing, BenchTimes& t) {
  LOFT_CHECK(schedule.steps >= 1 && schedule.warmup >= 0 && schedule.profiled >= 0, "bench: ",
             schedule.steps, " timed steps after ", schedule.warmup, " warm-up steps, ",
             schedule.profiled, " profiled");
  using Clock = std::chrono::steady_clock;
  int64_t n = 0;
  for (; n < schedule.warmup; ++n) step(n + 1);
  start_timing();
  t.step_seconds.clear();
  for (int64_t i = 0; i < schedule.steps; ++i, ++n) {
    const auto start = Clock::now();
    t.last_loss = step(n + 1);
    t.step_seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  t.median_s = median(t.step_seconds);
  t.mean_s = std::accumulate(t.step_seconds.begin(), t.step_seconds.end(), 0.0) /
             double(t.step_seconds.size());
  t.tokens_per_step = tokens_per_step;
  t.tokens_per_s = t.median_s > 0 ? double(tokens_per_step) / t.median_s : 0.0;
  return n;
}

BenchTimes time_training_steps(TrainableModel& model, AdamW& optimizer, const ModelBatch& batch,
                               Device device, const BenchSchedule& schedule) {
  using Clock = std::chrono::steady_clock;
  BenchTimes t;
  // The method's calibration pass (if any), on the bench batch, as finetune runs it.
  run_calibration(model, [&batch]() -> std::optional<ModelBatch> { return batch; });
  size_t returns_before = 0;
  int64_t step = time_steps(
      schedule, batch.ids.numel(),
      [&](int64_t n) {
        const double loss = bench_step(model, optimizer, batch, schedule, n);
        synchronize(device);
        return loss;
      },
      [&] {
        synchronize(device);
        reset_peak_memory(device);
        returns_before = memory_stats(device).pressure_returns;
      },
      t);
  const MemoryStats after = memory_stats(device);
  t.peak_bytes = int64_t(after.peak_allocated);
  t.allocator_returns = int64_t(after.pressure_returns - returns_before);
  if (schedule.profiled == 0) return t;

  const auto start = Clock::now();
  prof::start(device, schedule.profile_ops);
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
  for (const auto& [op, time] : prof::op_times())
    t.op_breakdown[op] = {time.seconds / n, time.calls / schedule.profiled};
  return t;
}

}  // namespace loft
