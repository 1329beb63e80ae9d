// One element of torch.optim.AdamW's single-tensor update, in the CPU reference's operation order
// (engine/ops/cpu/optim_cpu.cpp). The _rn intrinsics keep nvcc from contracting into FMAs, which
// would round differently, so the per-tensor and multi-tensor kernels match the CPU bit for bit.
#pragma once
#include "engine/ops/adamw_math.h"

namespace loft::ops::cuda {

__device__ __forceinline__ void adamw_element(float& p, float& m, float& v, float g,
                                              const AdamWConsts& c) {
  const float pi = __fmul_rn(p, c.decay);
  const float mi = __fadd_rn(__fmul_rn(c.beta1, m), __fmul_rn(c.one_minus_beta1, g));
  const float vi =
      __fadd_rn(__fmul_rn(c.beta2, v), __fmul_rn(__fmul_rn(c.one_minus_beta2, g), g));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.bc2_sqrt), c.eps);
  m = mi;
  v = vi;
  p = __fsub_rn(pi, __fdiv_rn(__fmul_rn(c.step_size, mi), denom));
}

}  // namespace loft::ops::cuda
