// Helpers for the CUDA op tests: inputs are drawn on the CPU, moved to cuda:0 (and converted to
// BF16 there with ops::convert), and the CPU reference runs on exactly the values the GPU saw.
#pragma once
#include <string>

#include "engine/ops/ops.h"
#include "tests/common/test_util.h"

namespace loft::test {

inline const Device kGpu = Device::cuda(0);

// `cpu` (an F32 CPU tensor) on cuda:0 in dtype `dt`, converted on the GPU when not F32.
inline Tensor to_gpu(const Tensor& cpu, DType dt) {
  Tensor f = cpu.to(kGpu);
  if (dt == DType::F32) return f;
  Tensor out = Tensor::empty(cpu.shape(), dt, kGpu);
  ops::convert(f, out);
  return out;
}

// The values a tensor holds, as a new F32 CPU tensor: the reference input for the CPU op.
inline Tensor cpu_f32(const Tensor& t) {
  return Tensor::from_vector(t.to_float_vector(), t.shape());
}

// Tolerance on rel_error for outputs stored in `dt` (BF16 outputs carry their own rounding).
inline double tol(DType dt) { return dt == DType::F32 ? 1e-5 : 1e-2; }

inline std::string name(DType dt) { return std::string(dtype_name(dt)); }

constexpr DType kActivationDtypes[] = {DType::F32, DType::BF16};

}  // namespace loft::test
