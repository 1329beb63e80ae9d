// convert / axpy / add_bias / scale on the CPU.
#include <cstring>

#include "engine/ops/ops.h"

namespace loft::ops::cpu {
namespace {

float load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default: throw Error(cat("convert: unsupported dtype ", dtype_name(t)));
  }
}

void store(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::F32: static_cast<float*>(p)[i] = v; return;
    case DType::BF16: static_cast<uint16_t*>(p)[i] = f32_to_bf16(v); return;
    case DType::F16: static_cast<uint16_t*>(p)[i] = f32_to_f16(v); return;
    default: throw Error(cat("convert: unsupported dtype ", dtype_name(t)));
  }
}

}  // namespace

void convert(const Tensor& src, Tensor& dst) {
  if (src.dtype() == dst.dtype()) {
    std::memmove(dst.data(), src.data(), src.nbytes());
    return;
  }
  // Every F16/BF16 value is exact in fp32, so going through fp32 rounds only once.
  const void* s = src.data();
  void* d = dst.data();
  for (int64_t i = 0, n = src.numel(); i < n; ++i) store(d, dst.dtype(), i, load(s, src.dtype(), i));
}

void axpy(float alpha, const Tensor& x, Tensor& y) {
  const float* xp = x.ptr<float>();
  float* yp = y.ptr<float>();
  for (int64_t i = 0, n = y.numel(); i < n; ++i) yp[i] += alpha * xp[i];
}

void add_bias(Tensor& y, const Tensor& bias) {
  const float* b = bias.ptr<float>();
  float* p = y.ptr<float>();
  const int64_t d = y.size(1);
  for (int64_t r = 0, rows = y.size(0); r < rows; ++r)
    for (int64_t j = 0; j < d; ++j) p[r * d + j] += b[j];
}

void scale(Tensor& x, float alpha) {
  float* p = x.ptr<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) p[i] *= alpha;
}

}  // namespace loft::ops::cpu
