// Timing of data-parallel training steps for `loft bench --gpus` (docs/multi-gpu.md): N replicas,
// one per device, each taking the bench batch as its one micro-batch of every step through
// train_step with a RankStep, so a step is N × the batch's tokens and its gradients are summed
// over the ranks (a GradReducer over NCCL; a test's in-process sum) before the clipping. The ranks
// run in RankWorkers (one thread per device; the first error aborts the others' syncs), and a
// step's time runs from its start until every rank has finished it (each worker synchronises its
// own device). Warm-up, the timed loop and the statistics are time_steps (bench.h), as for one
// device. No profiled breakdown (the profiler is one per process and would mix the ranks' parts):
// instead each rank times its step's parts on its own stream (RankTimes, bench.h), to show where
// a data-parallel step loses time against one GPU's.
#pragma once
#include <span>

#include "engine/train/bench.h"

namespace loft {

// One rank of a data-parallel bench: its replica, the optimizer over the replica's params, the
// bench batch on its device, and its GradientSync.
struct BenchRank {
  TrainableModel* model = nullptr;
  AdamW* optimizer = nullptr;
  const ModelBatch* batch = nullptr;
  GradientSync* sync = nullptr;
  Device device = Device::cpu();
};

// Runs the schedule's warm-up and timed steps on every rank (schedule.profiled must be 0), after
// the method's calibration pass on each. Every replica must start identical and the batches hold
// the same target count. `serial`: the ranks share one device (CPU replicas in a test) and
// compute one at a time (RankWorkers' serial mode). Returns tokens_per_step = Σ batch tokens over
// the ranks, tokens/s over the median step, the largest of the ranks' peaks, rank 0's loss
// (the whole step's: summed over the ranks) and each rank's RankTimes. Throws the first rank's Error (a non-finite loss or
// gradient norm, a peer that stopped answering).
BenchTimes time_parallel_training_steps(std::span<const BenchRank> ranks,
                                        const BenchSchedule& schedule, bool serial = false);

}  // namespace loft
