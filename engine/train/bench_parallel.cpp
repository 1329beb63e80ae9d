#include "engine/train/bench_parallel.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "engine/device/memory.h"
#include "engine/device/stream_clock.h"
#include "engine/train/rank_workers.h"
#include "engine/train/trainer.h"

namespace loft {

namespace {

using Clock = std::chrono::steady_clock;

// One rank's timing of a step (RankTimes): points on its stream at the step's start, when the sum
// is called (the backward queued before it), when the sum has returned, and at the step's end;
// the host clock at the start and at the call of the sum.
enum Point : size_t { kStart, kSumCalled, kSummed, kEnd, kPoints };

class TimedSync final : public ForwardingSync {
 public:
  TimedSync(GradientSync& inner, Device device) : ForwardingSync(inner), clock_(device, kPoints) {}
  void sum(std::span<Param* const> params, std::span<float> scalars) override {
    host_sum_ = Clock::now();
    clock_.mark(kSumCalled);
    inner_.sum(params, scalars);
    clock_.mark(kSummed);
  }

  void start() {
    host_start_ = Clock::now();
    clock_.mark(kStart);
  }
  void end() { clock_.mark(kEnd); }
  // After end() and a synchronisation of the rank's device: adds this step's parts.
  void add_step(RankTimes& t) {
    const auto host_end = Clock::now();
    t.compute_s += clock_.seconds(kStart, kSumCalled);
    t.exposed_sync_s += clock_.seconds(kSumCalled, kSummed);
    t.after_sync_s += clock_.seconds(kSummed, kEnd);
    t.gpu_step_s += clock_.seconds(kStart, kEnd);
    t.host_until_sum_s += std::chrono::duration<double>(host_sum_ - host_start_).count();
    t.host_step_s += std::chrono::duration<double>(host_end - host_start_).count();
  }

 private:
  StreamClock clock_;
  Clock::time_point host_start_, host_sum_;
};

}  // namespace

BenchTimes time_parallel_training_steps(std::span<const BenchRank> ranks,
                                        const BenchSchedule& schedule, bool serial) {
  LOFT_CHECK(!ranks.empty(), "a data-parallel bench needs at least one rank");
  LOFT_CHECK(schedule.profiled == 0, "a data-parallel bench has no profiled steps (asked for ",
             schedule.profiled, ")");
  std::vector<Device> devices;
  int64_t step_targets = 0, tokens = 0;
  for (const BenchRank& r : ranks) {
    LOFT_CHECK(r.model && r.optimizer && r.batch && r.sync, "a data-parallel bench rank needs its ",
               "model, optimizer, batch and gradient sync");
    devices.push_back(r.device);
    step_targets += r.batch->target_count;
    tokens += r.batch->ids.numel();
  }
  RankWorkers workers(devices, serial);
  std::vector<std::unique_ptr<TimedSync>> timed(ranks.size());
  workers.run([&](size_t i) { timed[i] = std::make_unique<TimedSync>(*ranks[i].sync, devices[i]); });
  std::vector<GradientSync*> syncs;
  for (const auto& t : timed) syncs.push_back(workers.serialized(t.get()));
  const auto abort_all = [&] {
    for (const BenchRank& r : ranks) r.sync->abort();
  };

  BenchTimes t;
  // The method's calibration pass (if any) on every rank, as the data-parallel trainer runs it.
  workers.run([&](size_t i) {
    run_calibration(*ranks[i].model, [&]() -> std::optional<ModelBatch> { return *ranks[i].batch; });
  });
  std::vector<double> losses(ranks.size());
  std::vector<RankTimes> parts(ranks.size());
  bool timing = false;  // the parts add up over the timed steps only
  const auto step = [&](int64_t n) {
    workers.run(
        [&](size_t i) {
          const BenchRank& me = ranks[i];
          const RankStep rank{syncs[i], step_targets};
          timed[i]->start();
          losses[i] = mean_loss(train_step(*me.model, *me.optimizer,
                                           std::span<const ModelBatch>(me.batch, 1),
                                           schedule.max_grad_norm, schedule.lr, n, &rank));
          timed[i]->end();
          synchronize(me.device);  // the step ends when every rank's device is done
          if (timing) timed[i]->add_step(parts[i]);
        },
        abort_all);
    return losses.front();
  };
  std::vector<size_t> returns_before(ranks.size(), 0);
  const auto start_timing = [&] {
    workers.run([&](size_t i) {
      synchronize(ranks[i].device);
      reset_peak_memory(ranks[i].device);
      returns_before[i] = memory_stats(ranks[i].device).pressure_returns;
    });
    timing = true;
  };
  time_steps(schedule, tokens, step, start_timing, t);
  const double steps = double(std::max<int64_t>(schedule.steps, 1));
  for (RankTimes p : parts) {
    for (double* v : {&p.compute_s, &p.exposed_sync_s, &p.after_sync_s, &p.gpu_step_s,
                      &p.host_until_sum_s, &p.host_step_s})
      *v /= steps;
    t.ranks.push_back(p);
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    const MemoryStats s = memory_stats(ranks[i].device);
    t.peak_bytes = std::max(t.peak_bytes, int64_t(s.peak_allocated));
    t.allocator_returns += int64_t(s.pressure_returns - returns_before[i]);
  }
  return t;
}

}  // namespace loft
