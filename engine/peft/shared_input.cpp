#include "engine/peft/shared_input.h"

namespace loft {

const quant::QuantizedTensor& SharedInput::quantized(
    const std::string& key, const std::function<quant::QuantizedTensor()>& make) {
  auto it = quantized_.find(key);
  if (it == quantized_.end()) it = quantized_.emplace(key, make()).first;
  return it->second;
}

const Tensor& SharedInput::derived(const std::string& key, const std::function<Tensor()>& make) {
  auto it = derived_.find(key);
  if (it == derived_.end()) it = derived_.emplace(key, make()).first;
  return it->second;
}

void SharedInput::check_is_input(const Tensor& x) const {
  LOFT_CHECK(x_.data() == x.data() && x_.shape() == x.shape() && x_.dtype() == x.dtype(),
             "shared input ", x_.str(), " is not the projection's input ", x.str());
}

const quant::QuantizedTensor& quantized_input(SharedInput* shared, const Tensor& x,
                                              const std::string& key,
                                              const std::function<quant::QuantizedTensor()>& make,
                                              quant::QuantizedTensor& out) {
  if (!shared) return out = make();
  shared->check_is_input(x);
  return shared->quantized(key, make);
}

}  // namespace loft
