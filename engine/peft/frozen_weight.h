// How a method stores a frozen projection weight and multiplies by it, separate from what it
// adapts: dense in the compute dtype (LoRA), NF4-DQ decoded per GEMM (QLoRA), rotated and
// quantized with low-precision GEMMs (HALO). The default products decode the weight to the
// compute dtype (materialize) and run the ordinary GEMM.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft {
class SharedBackward;
class SharedInput;
}

namespace loft {

class FrozenWeight {
 public:
  virtual ~FrozenWeight() = default;
  virtual int64_t out_features() const = 0;
  virtual int64_t in_features() const = 0;
  virtual DType compute_dtype() const = 0;
  virtual Device device() const = 0;
  // [out, in] in the compute dtype on the device, ready for a GEMM.
  virtual Tensor materialize() const = 0;
  // Bytes the store keeps resident.
  virtual size_t stored_bytes() const = 0;
  // The tensors it keeps resident, which training only reads: what --shard-backbone spreads over
  // the ranks (engine/parallel/sharded_backbone.h), pointing them at a gathered copy while their
  // layer runs. The store must read them through these members at each call. Empty: this store
  // cannot be sharded.
  virtual std::vector<Tensor*> stored_tensors() { return {}; }

  // y [T, out] = x·Wᵀ (y overwritten); `shared`: as AdaptedLinear::forward's.
  virtual void forward(const Tensor& x, Tensor& y, SharedInput* shared = nullptr) const;
  // y += x·Wᵀ. The default runs forward into a temporary and adds it; stores whose product is one
  // ordinary GEMM add in its epilogue instead (gemm_accumulates), where reading y costs nothing
  // beside the compute-bound GEMM.
  virtual void forward_add(const Tensor& x, Tensor& y, SharedInput* shared = nullptr) const;
  // True when forward_add and backward_input(accumulate) add inside the GEMM: a caller with its
  // own term to add (LoRA's) then writes that term first and lets the GEMM add onto it, instead
  // of a second pass that reads and writes y.
  virtual bool gemm_accumulates() const { return false; }
  // dx [T, in] = dy·W, or dx += dy·W when accumulate.
  virtual void backward_input(const Tensor& dy, Tensor& dx, bool accumulate) const;
  // The same for one of the projections that read one input (`group`, in the order the model
  // calls them; the first writes dx unless accumulate): a store whose products share a last step
  // that is linear (HALO's inverse rotations) sums them in the group's scratch and queues that
  // step once, writing or adding to dx at group.finish; it then returns true. False: nothing was
  // done, the caller runs backward_input.
  virtual bool backward_input_grouped(const Tensor& dy, Tensor& dx, bool accumulate,
                                      SharedBackward& group) const {
    (void)dy, (void)dx, (void)accumulate, (void)group;
    return false;
  }

  // State a store keeps beyond the weight (e.g. a counter or a per-layer choice), which the
  // projection holding it reports as its method state (AdaptedLinear::method_state); restored
  // with load_method_state. Empty for stores that keep none.
  virtual std::map<std::string, Tensor> method_state() const { return {}; }
  virtual void load_method_state(const std::map<std::string, Tensor>& state) { (void)state; }
  // A calibration pass before step 0 (AdaptedLinear::calibration_batches): how many micro-batches
  // (0: none), and the hooks around their forward/backward passes.
  virtual int calibration_batches() const { return 0; }
  virtual void start_calibration() {}
  virtual void finish_calibration() {}
};

// The weight as loaded, in the compute dtype (bf16 on CUDA, f32 on the CPU).
std::unique_ptr<FrozenWeight> dense_weight(Tensor weight);

// [out, in] F32 on the CPU, always a fresh copy: what the frozen weight is, for merges and checks.
Tensor frozen_weight_f32(const FrozenWeight& w);

}  // namespace loft
