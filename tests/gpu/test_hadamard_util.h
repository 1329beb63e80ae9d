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

}  // namespace loft::test
