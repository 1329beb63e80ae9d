#include "engine/tensor/tensor.h"

#include <sstream>

namespace loft {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

static void check_shape(const Shape& shape) {
  for (int64_t d : shape) LOFT_CHECK(d >= 0, "negative dimension in shape ", shape_str(shape));
}

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  check_shape(shape);
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = allocate_storage(t.nbytes(), device);
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
  Tensor t = empty(std::move(shape), dtype, device);
  t.zero_();
  return t;
}

Tensor Tensor::from_host(const void* data, Shape shape, DType dtype, Device device) {
  Tensor t = empty(std::move(shape), dtype, device);
  copy_bytes(t.data(), device, data, Device::cpu(), t.nbytes());
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& v, Shape shape, Device device) {
  LOFT_CHECK(int64_t(v.size()) == shape_numel(shape), "from_vector: ", v.size(),
             " values for shape ", shape_str(shape));
  return from_host(v.data(), std::move(shape), DType::F32, device);
}

Tensor Tensor::from_vector(const std::vector<int32_t>& v, Shape shape, Device device) {
  LOFT_CHECK(int64_t(v.size()) == shape_numel(shape), "from_vector: ", v.size(),
             " values for shape ", shape_str(shape));
  return from_host(v.data(), std::move(shape), DType::I32, device);
}

Tensor Tensor::wrap(const void* data, Shape shape, DType dtype, Device device,
                    std::shared_ptr<const void> owner) {
  check_shape(shape);
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = std::make_shared<Storage>(const_cast<void*>(data), t.nbytes(), device,
                                         [owner = std::move(owner)](void*) {});
  return t;
}

int64_t Tensor::size(int d) const {
  const int n = dim();
  if (d < 0) d += n;
  LOFT_CHECK(d >= 0 && d < n, "dimension ", d, " out of range for tensor ", str());
  return shape_[d];
}

std::string Tensor::str() const {
  if (!defined()) return "<undefined tensor>";
  return cat(shape_str(shape_), ' ', dtype_name(dtype_), ' ', device_.str());
}

void* Tensor::data() const {
  LOFT_CHECK(defined(), "use of an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_;
}

Tensor Tensor::view(Shape shape) const {
  check_shape(shape);
  LOFT_CHECK(shape_numel(shape) == numel(), "cannot view ", str(), " as ", shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice(int64_t start, int64_t len) const {
  LOFT_CHECK(dim() >= 1 && start >= 0 && len >= 0 && start + len <= shape_[0], "slice [", start,
             ", ", start + len, ") out of range for ", str());
  Tensor t = *this;
  t.shape_[0] = len;
  t.offset_ += size_t(start) * (nbytes() / std::max<int64_t>(shape_[0], 1));
  return t;
}

Tensor Tensor::to(Device device) const {
  Tensor t = empty(shape_, dtype_, device);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::clone() const { return to(device_); }

void Tensor::copy_from(const Tensor& src) {
  LOFT_CHECK(src.shape_ == shape_ && src.dtype_ == dtype_, "copy_from: ", src.str(), " into ",
             str());
  copy_bytes(data(), device_, src.data(), src.device_, nbytes());
}

void Tensor::zero_() { zero_bytes(data(), device_, nbytes()); }

std::vector<float> Tensor::to_float_vector() const {
  const Tensor h = device_.is_cpu() ? *this : to(Device::cpu());
  std::vector<float> out(static_cast<size_t>(numel()));
  switch (dtype_) {
    case DType::F32:
      std::copy_n(h.ptr<float>(), out.size(), out.data());
      break;
    case DType::BF16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(h.ptr<uint16_t>()[i]);
      break;
    case DType::F16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = f16_to_f32(h.ptr<uint16_t>()[i]);
      break;
    default:
      throw Error(cat("to_float_vector: unsupported dtype ", dtype_name(dtype_)));
  }
  return out;
}

std::vector<int64_t> Tensor::to_int_vector() const {
  const Tensor h = device_.is_cpu() ? *this : to(Device::cpu());
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (dtype_) {
      case DType::I8: out[i] = h.ptr<int8_t>()[i]; break;
      case DType::U8: out[i] = h.ptr<uint8_t>()[i]; break;
      case DType::I32: out[i] = h.ptr<int32_t>()[i]; break;
      case DType::I64: out[i] = h.ptr<int64_t>()[i]; break;
      default: throw Error(cat("to_int_vector: unsupported dtype ", dtype_name(dtype_)));
    }
  }
  return out;
}

}  // namespace loft
