// What the projections that read one input share. q, k and v all read rmsnorm(x), gate and up
// the other norm's output: a method that derives something from its input (HALO: the rotated
// FP8/INT8 codes; FALQON: the E4M3 codes) asks here, so it is computed once per group instead
// of once per projection. The model makes one per input and lets it go when the group is done;
// the input must not change in between.
#pragma once
#include <functional>
#include <map>
#include <string>

#include "engine/quant/quantize.h"

namespace loft {

class SharedInput {
 public:
  explicit SharedInput(Tensor x) : x_(std::move(x)) {}
  const Tensor& x() const { return x_; }
  // The quantized input stored under `key` (which names everything `make` depends on besides
  // the input, e.g. "halo:rotated:e4m3"), made by `make` on first use.
  const quant::QuantizedTensor& quantized(const std::string& key,
                                          const std::function<quant::QuantizedTensor()>& make);

 private:
  Tensor x_;
  std::map<std::string, quant::QuantizedTensor> quantized_;
};

// quantized(key, make) of `shared` when it is given (its input must be x: same storage, shape
// and dtype, else Error), or make() itself. `out` keeps a result nobody else holds.
const quant::QuantizedTensor& quantized_input(SharedInput* shared, const Tensor& x,
                                              const std::string& key,
                                              const std::function<quant::QuantizedTensor()>& make,
                                              quant::QuantizedTensor& out);

}  // namespace loft
