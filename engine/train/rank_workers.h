// The threads of a data-parallel run in one process (docs/multi-gpu.md, "Processes and threads"):
// one per local rank, each bound to its rank's device, so N GPUs compute at once and each thread
// drives its own NCCL communicator. A failure on one rank must not leave the others waiting for
// it in a collective: the first error aborts every rank's GradientSync, and that first error (not
// the "aborted" ones it causes) is what the caller sees.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/train/train_step.h"

namespace loft {

class RankWorkers {
 public:
  // `devices[i]`: local rank i's device. `serial`: the ranks share one device (CPU replicas in a
  // test: they share its scratches) and compute one at a time; a rank lets the next one run while
  // it waits in its GradientSync, which is why their syncs go through serialized().
  RankWorkers(std::vector<Device> devices, bool serial = false);

  size_t size() const { return devices_.size(); }
  // Runs work(i) for every local rank i, each on its own thread (one rank: on the calling
  // thread), and returns when all have. When one throws, `on_failure` runs once, at once (it
  // aborts the syncs), and the first error is rethrown after every rank has returned.
  void run(const std::function<void(size_t)>& work, const std::function<void()>& on_failure = {});
  // The GradientSync rank work should use: `inner` itself, or with `serial` a wrapper that
  // releases the compute turn while it waits for the other ranks.
  GradientSync* serialized(GradientSync* inner);

 private:
  std::vector<Device> devices_;
  bool serial_;
  std::mutex compute_;  // with serial_: held by the rank computing now
  std::vector<std::unique_ptr<GradientSync>> wrappers_;
};

}  // namespace loft
