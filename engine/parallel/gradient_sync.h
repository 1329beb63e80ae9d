// The interface a training step (engine/train/train_step.h) sums gradients through; GradReducer
// (engine/parallel/grad_reducer.h) is the NCCL one. It lives beside it so that engine/train
// depends on engine/parallel and not the reverse.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/tensor/param.h"

namespace loft {

// What data-parallel ranks exchange (docs/multi-gpu.md; NCCL underneath): the step's gradients,
// summed between the backward and the clipping so that every rank takes the same update, a few
// host scalars with them (the loss), and the replicas' digests.
class GradientSync {
 public:
  virtual ~GradientSync() = default;
  // Opens a step's sum, before this rank's backward: its params in the order the backward
  // finishes their gradients (TrainableModel::grad_order). Every rank passes the same list, so
  // the buckets planned from it are the same on every rank whatever ready() says when.
  virtual void begin(std::span<Param* const> order) { (void)order; }
  // During the backward of the step's last micro-batch (the model's GradReadyHook): these
  // params' gradients are final; the sync may start summing them while the backward goes on.
  // Only timing depends on it: what is exchanged is the same with or without these calls.
  virtual void ready(std::span<Param* const> params) { (void)params; }
  // Sums every param's gradient in place over the ranks (what ready() started, and the rest), and
  // `scalars` with them (this rank's values in, the sums over every rank out), and waits. Every
  // rank passes the same params (those begin() named, if it was called) and as many scalars.
  virtual void sum(std::span<Param* const> params, std::span<float> scalars) = 0;
  // Every rank's `value`, in rank order (the replica check: rank 0 compares digests).
  virtual std::vector<uint64_t> gather(uint64_t value) = 0;
  // Gives up on the peers now (this rank failed; they must not wait for it): pending and later
  // exchanges end with an Error instead of waiting. Idempotent.
  virtual void abort() = 0;
};

// A GradientSync that hands every call to another: the wrappers that add to one or two calls
// (RankWorkers' serial turns, bench's per-rank timing, a test's sync without ready()) derive from
// it and override only those.
class ForwardingSync : public GradientSync {
 public:
  explicit ForwardingSync(GradientSync& inner) : inner_(inner) {}
  void begin(std::span<Param* const> order) override { inner_.begin(order); }
  void ready(std::span<Param* const> params) override { inner_.ready(params); }
  void sum(std::span<Param* const> params, std::span<float> scalars) override {
    inner_.sum(params, scalars);
  }
  std::vector<uint64_t> gather(uint64_t value) override { return inner_.gather(value); }
  void abort() override { inner_.abort(); }

 protected:
  GradientSync& inner_;
};

}  // namespace loft
