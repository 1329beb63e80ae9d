#include "engine/peft/weight_source.h"

namespace loft {

WeightSource::WeightSource(Tensor dense) : dense_(std::move(dense)) {
  LOFT_CHECK(dense_.defined() && dense_.dim() == 2, "a frozen weight must be [out, in], got ",
             dense_.defined() ? dense_.str() : std::string("(undefined)"));
  dtype_ = dense_.dtype();
  device_ = dense_.device();
}

WeightSource::WeightSource(quant::ScaledFp8 fp8, DType compute_dtype, Device device)
    : fp8_(std::move(fp8)), dtype_(compute_dtype), device_(device) {
  quant::check_scaled_fp8(fp8_, "WeightSource");
  LOFT_CHECK(dtype_ == DType::F32 || dtype_ == DType::BF16,
             "WeightSource: compute dtype must be F32 or BF16, got ", dtype_name(dtype_));
}

int64_t WeightSource::out_features() const {
  return is_fp8() ? fp8_.out_features() : dense_.size(0);
}

int64_t WeightSource::in_features() const {
  return is_fp8() ? fp8_.in_features() : dense_.size(1);
}

namespace {
// The FP8 weight decoded on the host as `dtype`, then moved to `device`.
Tensor decoded(const quant::ScaledFp8& w, DType dtype, Device device) {
  Tensor host = Tensor::empty(w.codes.shape(), dtype);
  quant::dequantize(w, host);
  return device.is_cpu() ? host : host.to(device);
}
}  // namespace

Tensor WeightSource::dense() const { return is_fp8() ? decoded(fp8_, dtype_, device_) : dense_; }

Tensor WeightSource::values() const {
  return is_fp8() ? decoded(fp8_, DType::F32, device_) : dense_;
}

std::optional<quant::QuantizedTensor> WeightSource::e4m3_codes() const {
  if (!is_fp8()) return std::nullopt;
  const std::optional<float> s = quant::common_scale(fp8_);
  if (!s) return std::nullopt;
  quant::QuantizedTensor q;
  q.format = quant::LowpFormat::E4M3;
  q.codes = fp8_.codes.to(device_);  // a copy: the file's mapping is read-only
  q.scale = Tensor::from_vector(std::vector<float>{*s}, {1}, device_);
  return q;
}

}  // namespace loft
