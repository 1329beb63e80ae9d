// Grad checkpointing keeps each block's input [T, hidden] for the backward's recompute: at
// llama-13b 16×512 that is 3.4 GB of a 24 GB card. On a GPU they can wait in pinned host memory
// instead: each input is copied down on a second stream while the next blocks compute, and copied
// back one layer ahead of its backward. The copies are bytes, so results are bit-identical; over
// PCIe an input takes a few ms against tens of ms of compute per layer, so the copies hide.
#pragma once
#include <cstddef>
#include <memory>

#include "engine/tensor/tensor.h"

namespace loft {

class CheckpointOffload {
 public:
  virtual ~CheckpointOffload() = default;
  // Starts copying tensor `item` of layer l (on the device, contiguous; item < the items given
  // at make) to its host slot. Its device memory is let go at the first store of layer l + 2,
  // where the compute stream waits for this copy.
  virtual void store(size_t l, size_t item, const Tensor& x) = 0;
  // Starts bringing every stored tensor of layer l back (call it a layer ahead of fetch).
  virtual void prefetch(size_t l) = 0;
  // Tensor `item` of layer l on the device; the compute stream waits for its copy first.
  virtual Tensor fetch(size_t l, size_t item) = 0;

  // Pacing, for tensors a layer may keep or not (the attention's): the forward's stores run
  // between begin_forward and end_forward. The offload times that forward on the compute stream
  // (less the time it waited for copies) and its own copies, and room_for(l, bytes) then says,
  // once for each layer after its input was stored, whether `bytes` more fit in what the host
  // link moves while a layer computes, so that the copies never fall behind and stall the
  // compute stream (PCIe is narrower on some cards and slots). Yes until a step was measured.
  virtual void begin_forward() = 0;
  virtual void end_forward() = 0;
  virtual bool room_for(size_t l, size_t bytes) = 0;
};

// One per model and device, with `items` tensors a layer at most (the block input; the
// attention's tensors when those are kept too); nullptr on the CPU (host memory is the device's
// there) or in a build without CUDA.
std::unique_ptr<CheckpointOffload> make_checkpoint_offload(Device device, size_t layers,
                                                           size_t items = 1);

}  // namespace loft
