#include "engine/peft/shared_input.h"

namespace loft {

const quant::QuantizedTensor& SharedInput::quantized(
    const std::string& key, const std::function<quant::QuantizedTensor()>& make) {
  auto it = quantized_.find(key);
  if (it == quantized_.end()) it = quantized_.emplace(key, make()).first;
  return it->second;
}

const quant::QuantizedTensor& quantized_input(SharedInput* shared, const Tensor& x,
                                              const std::string& key,
                                              const std::function<quant::QuantizedTensor()>& make,
                                              quant::QuantizedTensor& out) {
  if (!shared) return out = make();
  const Tensor& s = shared->x();
  LOFT_CHECK(s.data() == x.data() && s.shape() == x.shape() && s.dtype() == x.dtype(),
             "shared input ", s.str(), " is not the projection's input ", x.str());
  return shared->quantized(key, make);
}

}  // namespace loft
