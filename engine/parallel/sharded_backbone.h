// The frozen backbone sharded over data-parallel ranks (issue 30, `--shard-backbone`; FSDP-style,
// docs/multi-gpu.md): each of N ranks keeps 1/N of every layer's frozen codes, and a layer's
// whole codes are gathered into one of two slots just before the layer runs (the next layer's on
// the way while this one computes). The codes are bytes to this class: a layer's stored tensors
// (AdaptedLinear::sharded_tensors of its projections) laid end to end, 256-byte aligned, padded
// to N equal shares; rank r keeps share r. The stores keep reading their own Tensor members, which
// use() points into the slot that holds their layer, so a sharded model computes with the same
// bytes as an unsharded one: bit for bit the same results.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft {

// How a rank fetches a layer's shares from every rank. Every rank gathers the same layers in the
// same order (the model runs the same loop on each).
class ShardGather {
 public:
  virtual ~ShardGather() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // This rank's share of `layer`, once, when it is made (before any gather): what the other ranks
  // will gather. A collective ignores it; an in-process stand-in (tests) keeps it.
  virtual void share(int layer, const Tensor& local) {
    (void)layer;
    (void)local;
  }
  // Queues: full [world × local.nbytes()] (U8) = every rank's share of `layer`, in rank order,
  // after the work queued so far on the device's stream (so a slot is free to overwrite), beside
  // what is queued after. `slot` (0 or 1) names the gather for join().
  virtual void gather(int layer, const Tensor& local, Tensor& full, int slot) = 0;
  // The device's stream waits (without blocking the host) for the last gather into `slot`.
  virtual void join(int slot) = 0;
};

class ShardedBackbone {
 public:
  explicit ShardedBackbone(ShardGather& gather);
  // The next layer: its stored tensors (each defined, all layers on one device). Moves this
  // rank's share of the layer's bytes into a tensor of its own and points every stored tensor
  // into a slot (not yet gathered: stale until use()), so the stores' own allocations go when
  // nothing else holds them. Layers are added as a model is built, before any use().
  void add_layer(const std::vector<Tensor*>& stored);

  // Before layer l computes: its codes are in a slot (gathered now unless a slot holds them) and
  // its tensors point there; `next` (or -1) is the layer expected after it, gathered into the
  // other slot beside l's compute.
  void use(int layer, int next);
  // After use(layer): its codes in the slot were written (FALQON's row update), the same writes
  // on every rank; this rank's share of them goes back into its own copy, so later gathers give
  // every rank the written bytes.
  void keep_written(int layer);

  size_t local_bytes() const;  // this rank's shares of every layer
  size_t slot_bytes() const;   // one slot (the largest layer's codes, padded)
  static constexpr size_t kAlign = 256;

 private:
  struct Piece {
    Tensor* tensor;
    Shape shape;
    DType dtype;
    size_t offset;  // in the layer's bytes
  };
  struct Layer {
    std::vector<Piece> pieces;
    size_t bytes = 0;  // padded: a multiple of world × kAlign
    Tensor local;      // U8 [bytes / world]
  };
  void point(int layer, int slot);
  void fetch(int layer, int slot);
  // The slot holding (or gathering) `layer`, or -1.
  int slot_of(int layer) const { return holds_[0] == layer ? 0 : holds_[1] == layer ? 1 : -1; }

  std::vector<Layer> layers_;
  ShardGather& gather_;
  Tensor slots_[2];
  int holds_[2] = {-1, -1};  // the layer whose codes each slot holds (or is gathering)
};

}  // namespace loft
