// What the projections that read one input share. q, k and v all read rmsnorm(x), gate and up
// the other norm's output: a method that derives something from its input (HALO: the rotated
// FP8/INT8 codes; FALQON: the E4M3 codes) asks here, so it is computed once per group instead
// of once per projection. The model makes one per input and lets it go when the group is done;
// the input must not change in between. The op that wrote the input may have measured its amax
// too (ops.h's *_amax outputs, for a method that takes_amax()): a per-tensor quantizer reads it
// instead of a pass over the input.
#pragma once
#include <functional>
#include <map>
#include <string>

#include "engine/quant/quantize.h"

namespace loft {

class SharedInput {
 public:
  // amax: undefined, or F32 [1] holding max |x| (NaN skipped).
  explicit SharedInput(Tensor x, Tensor amax = {}) : x_(std::move(x)), amax_(std::move(amax)) {}
  const Tensor& x() const { return x_; }
  const Tensor* amax() const { return amax_.defined() ? &amax_ : nullptr; }
  // The quantized input stored under `key` (which names everything `make` depends on besides
  // the input, e.g. "halo:rotated:e4m3"), made by `make` on first use.
  const quant::QuantizedTensor& quantized(const std::string& key,
                                          const std::function<quant::QuantizedTensor()>& make);
  // A tensor derived from the input stored under `key` (LoRA: its group's (x·Aᵀ)ᵀ), made by
  // `make` on first use.
  const Tensor& derived(const std::string& key, const std::function<Tensor()>& make);
  // Error unless x is this input (same storage, shape and dtype): a reader's own check.
  void check_is_input(const Tensor& x) const;

 private:
  Tensor x_, amax_;
  std::map<std::string, quant::QuantizedTensor> quantized_;
  std::map<std::string, Tensor> derived_;
};

// quantized(key, make) of `shared` when it is given (its input must be x: same storage, shape
// and dtype, else Error), or make() itself. `out` keeps a result nobody else holds.
const quant::QuantizedTensor& quantized_input(SharedInput* shared, const Tensor& x,
                                              const std::string& key,
                                              const std::function<quant::QuantizedTensor()>& make,
                                              quant::QuantizedTensor& out);

}  // namespace loft
