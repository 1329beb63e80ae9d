// An in-process GradientSync for N CPU ranks in N threads: the tests' stand-in for NCCL, which
// gives every rank the same bytes (here: the sum in rank order, written to every rank). A rank's
// abort() makes every pending and later exchange throw, as an aborted communicator does.
// Gradients reported ready (GradientSync::ready) are copied then, and sum() throws, before it
// meets the other ranks, when one changed since: an all-reduce launched at that moment would have
// summed a gradient the backward was still adding to.
#pragma once
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "engine/train/train_step.h"

namespace loft::test {

class ThreadGradSum {
 public:
  explicit ThreadGradSum(int world);
  ~ThreadGradSum();
  GradientSync& rank(int r);
  int world() const { return int(ranks_.size()); }

 private:
  class Rank;
  struct Arrival {
    std::span<Param* const> params;
    std::span<float> scalars;
    uint64_t value = 0;
  };
  // Waits until every rank has arrived; the last one runs `reduce` on all arrivals first.
  void meet(int r, Arrival a, const std::function<void(std::vector<Arrival>&)>& reduce);
  void abort_all();

  std::vector<std::unique_ptr<Rank>> ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Arrival> arrivals_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::vector<uint64_t> gathered_;
};

}  // namespace loft::test
