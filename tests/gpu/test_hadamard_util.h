// The row transform of the same values on the GPU and on the CPU, for the Hadamard kernel tests.
#pragma once
#include "engine/quant/hadamard.h"
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {

struct RotatedPair {
  Tensor gpu;  // x's dtype, on the GPU
  Tensor cpu;  // F32, from the values x holds
};

// hadamard_transform(plan, x) on x's device (a GPU) and on the CPU from x's values in F32.
inline RotatedPair rotate_on_both(const quant::HadamardPlan& plan, const Tensor& x, bool inverse) {
  RotatedPair r{Tensor::empty(x.shape(), x.dtype(), x.device()), Tensor()};
  quant::hadamard_transform(plan, x, r.gpu, inverse);
  const Tensor cx = cpu_f32(x);
  r.cpu = Tensor::empty(cx.shape(), DType::F32);
  quant::hadamard_transform(plan, cx, r.cpu, inverse);
  return r;
}

// A random [t, n] BF16 tensor on the GPU (seed 7) and its inverse transform there: model-sized, so
// the tests compare a few of its rows with the CPU (inverse_rows_on_cpu).
struct ModelInverse {
  Tensor x, y;
};
inline ModelInverse model_inverse_on_gpu(const quant::HadamardPlan& plan, int64_t t, int64_t n) {
  ModelInverse r{Tensor::empty({t, n}, DType::BF16, kGpu), Tensor::empty({t, n}, DType::BF16, kGpu)};
  ops::fill_random(r.x, 7, 1.0f);
  quant::hadamard_transform(plan, r.x, r.y, true);
  return r;
}

// Rows r0..r0 + rows - 1 of x's inverse transform as the CPU computes them (F32) from x's values.
inline Tensor inverse_rows_on_cpu(const quant::HadamardPlan& plan, const Tensor& x, int64_t r0, int64_t rows) {
  const Tensor part = cpu_f32(x.slice(r0, rows));
  Tensor want = Tensor::empty(part.shape(), DType::F32);
  quant::hadamard_transform(plan, part, want, true);
  return want;
}

}  // namespace loft::test
