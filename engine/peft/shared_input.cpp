#include "engine/peft/shared_input.h"

#include "engine/core/find_or_make.h"

namespace loft {

const quant::QuantizedTensor& SharedInput::quantized(
    const std::string& key, const std::function<quant::QuantizedTensor()>& make) {
  return find_or_make(quantized_, key, make);
}

const Tensor& SharedInput::derived(const std::string& key, const std::function<Tensor()>& make) {
  return find_or_make(derived_, key, make);
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
