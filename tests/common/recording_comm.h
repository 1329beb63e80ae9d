// A CPU Communicator that records what GradReducer asks of it: each all_reduce_sum group (its
// tensors, and `now`, a mark the test moves along, e.g. the layer whose backward just finished),
// and each wait. It "sums" by doubling, at once, as a world of two identical ranks would: a group
// launched before its gradients were final then ends as final + launched ≠ 2 · final.
#pragma once
#include <chrono>
#include <span>
#include <vector>

#include "engine/parallel/nccl_comm.h"

namespace loft::test {

class RecordingComm final : public Communicator {
 public:
  struct Group {
    std::vector<Tensor*> tensors;
    int now = 0;  // the test's mark when the group was launched
  };
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  Device device() const override { return Device::cpu(); }
  void all_reduce_sum(std::span<Tensor* const> tensors) override {
    groups.push_back({{tensors.begin(), tensors.end()}, now});
    for (Tensor* t : tensors) {
      float* d = t->ptr<float>();
      for (int64_t i = 0; i < t->numel(); ++i) d[i] *= 2;
    }
  }
  void wait(std::chrono::milliseconds timeout) override { waits.push_back(timeout); }
  void abort() override {}

  int now = 0;
  std::vector<Group> groups;
  std::vector<std::chrono::milliseconds> waits;
};

}  // namespace loft::test
