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
  // Starts copying layer l's input x (on the device, contiguous) to its host slot. x's device
  // memory is let go at the next store, where the compute stream waits for this copy.
  virtual void store(size_t l, const Tensor& x) = 0;
  // Starts bringing layer l's input back (call it a layer ahead of fetch).
  virtual void prefetch(size_t l) = 0;
  // Layer l's input on the device; the compute stream waits for its copy first.
  virtual Tensor fetch(size_t l) = 0;
};

// One per model and device; nullptr on the CPU (host memory is the device's there) or in a build
// without CUDA.
std::unique_ptr<CheckpointOffload> make_checkpoint_offload(Device device, size_t layers);

}  // namespace loft
