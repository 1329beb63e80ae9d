#include "engine/train/bench_parallel.h"

#include <algorithm>
#include <optional>

#include "engine/device/memory.h"
#include "engine/train/rank_workers.h"
#include "engine/train/trainer.h"

namespace loft {

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
  std::vector<GradientSync*> syncs;
  for (const BenchRank& r : ranks) syncs.push_back(workers.serialized(r.sync));
  const auto abort_all = [&] {
    for (const BenchRank& r : ranks) r.sync->abort();
  };

  BenchTimes t;
  // The method's calibration pass (if any) on every rank, as the data-parallel trainer runs it.
  workers.run([&](size_t i) {
    run_calibration(*ranks[i].model, [&]() -> std::optional<ModelBatch> { return *ranks[i].batch; });
  });
  std::vector<double> losses(ranks.size());
  const auto step = [&](int64_t n) {
    workers.run(
        [&](size_t i) {
          const BenchRank& me = ranks[i];
          const RankStep rank{syncs[i], step_targets};
          losses[i] = mean_loss(train_step(*me.model, *me.optimizer,
                                           std::span<const ModelBatch>(me.batch, 1),
                                           schedule.max_grad_norm, schedule.lr, n, &rank));
          synchronize(me.device);  // the step ends when every rank's device is done
        },
        abort_all);
    return losses.front();
  };
  const auto start_timing = [&] {
    workers.run([&](size_t i) {
      synchronize(ranks[i].device);
      reset_peak_memory(ranks[i].device);
    });
  };
  time_steps(schedule, tokens, step, start_timing, t);
  for (const BenchRank& r : ranks)
    t.peak_bytes = std::max(t.peak_bytes, int64_t(memory_stats(r.device).peak_allocated));
  return t;
}

}  // namespace loft
