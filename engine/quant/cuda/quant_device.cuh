// Device halves of the per-tensor quantizer shared by every kernel that writes FP8/INT8 codes
// (quantize_kernels.cu, the fused rotate + quantize and NF4 -> codes kernels): the scalar
// encoders of engine/quant/fp8.h and int8.h by format, the scale from a reduced amax, and the
// block amax reduction. Include only from .cu.
#pragma once
#include <cuda_fp8.h>

#include <type_traits>

#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/quant/fp8.h"
#include "engine/quant/int8.h"
#include "engine/quant/quantize.h"

namespace loft::quant::cuda {

// FP8: the hardware conversion where there is one (cvt.rn.satfinite, sm_89+), which gives the
// scalar encoder's codes for every non-NaN input (QuantCudaCodec.EncodersMatchCudaFp8Satfinite);
// NaN takes the encoder's 0x7f whatever its sign.
template <LowpFormat F>
__device__ __forceinline__ uint8_t encode(float v) {
  if constexpr (F == LowpFormat::INT8) return uint8_t(f32_to_int8(v));
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if constexpr (F == LowpFormat::E4M3)
    return v != v ? uint8_t(0x7f) : uint8_t(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
  if constexpr (F == LowpFormat::E5M2)
    return v != v ? uint8_t(0x7f) : uint8_t(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2));
#else
  if constexpr (F == LowpFormat::E4M3) return f32_to_fp8_e4m3(v);
  if constexpr (F == LowpFormat::E5M2) return f32_to_fp8_e5m2(v);
#endif
}

template <LowpFormat F>
__device__ __forceinline__ float decode(uint8_t c) {
  if constexpr (F == LowpFormat::INT8) return float(int8_t(c));
  constexpr __nv_fp8_interpretation_t kind = F == LowpFormat::E4M3 ? __NV_E4M3 : __NV_E5M2;
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(c, kind)));  // exact: fp8 ⊂ fp16
}

// The scale from the reduced amax, identical to the CPU's: amax / qmax, 1 when amax is 0.
__device__ __forceinline__ float scale_from(const unsigned* amax_bits, float qmax) {
  const float amax = __uint_as_float(*amax_bits);
  return amax == 0.0f ? 1.0f : __fdiv_rn(amax, qmax);
}

// The block amax reduction lives with the ops' kernels (kernel_util.cuh), which hand theirs to
// the quantizer.
using loft::ops::cuda_kernels::block_amax;

// Calls f(std::integral_constant<LowpFormat, F>{}) for the codes' format.
template <typename Fn>
void dispatch_format(LowpFormat f, Fn&& fn) {
  switch (f) {
    case LowpFormat::E4M3:
      return fn(std::integral_constant<LowpFormat, LowpFormat::E4M3>{});
    case LowpFormat::E5M2:
      return fn(std::integral_constant<LowpFormat, LowpFormat::E5M2>{});
    case LowpFormat::INT8:
      return fn(std::integral_constant<LowpFormat, LowpFormat::INT8>{});
  }
}

}  // namespace loft::quant::cuda
