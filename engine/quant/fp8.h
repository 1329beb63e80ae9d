// fp32 -> FP8 scalar encoders (E4M3 "fn" and E5M2), usable from host and device code so the CPU
// reference and the CUDA kernels produce bit-identical codes. Decoding is in engine/tensor/dtype.h.
// Rounding is to nearest, ties to even; finite input SATURATES at ±qmax (never an inf code, as
// cuda_fp8.h's __NV_SATFINITE); NaN -> the NaN code 0x7f; subnormals are encoded exactly.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define LOFT_HD __host__ __device__ __forceinline__
#else
#define LOFT_HD inline
#endif

namespace loft::quant {

LOFT_HD uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}

LOFT_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}

// One encoder for both formats: kMan mantissa bits, exponent bias kBias, the fp32 bit pattern of
// the largest finite value and its code.
template <int kMan, int kBias, uint32_t kMaxBits, uint8_t kMaxCode>
LOFT_HD uint8_t f32_to_fp8(float x) {
  const uint32_t u = float_bits(x);
  const uint8_t sign = uint8_t((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;           // NaN
  if (a >= kMaxBits) return sign | kMaxCode;  // saturate (inf included)
  constexpr uint32_t kMinNormalBits = uint32_t(127 + 1 - kBias) << 23;
  if (a < kMinNormalBits) {
    // Subnormal: |x| / 2^(1-kBias-kMan) is exact (a power-of-two scale of a value < 2^(1-kBias));
    // rintf rounds half to even. A result of 2^kMan is the smallest normal, whose code it is.
    return sign | uint8_t(rintf(bits_float(a) * float(1u << (kBias - 1 + kMan))));
  }
  // Normal: round the 23-bit mantissa to kMan bits, ties to even; a carry bumps the exponent.
  constexpr int kDrop = 23 - kMan;
  const uint32_t r = (a + ((1u << (kDrop - 1)) - 1u) + ((a >> kDrop) & 1u)) >> kDrop;
  return sign | uint8_t(r - (uint32_t(127 - kBias) << kMan));
}

// E4M3: bias 7, max 448 = 0x7e (0x7f is NaN, no infinities), smallest subnormal 2^-9.
LOFT_HD uint8_t f32_to_fp8_e4m3(float x) { return f32_to_fp8<3, 7, 0x43e00000u, 0x7e>(x); }
// E5M2: bias 15, max 57344 = 0x7b (0x7c is inf, never produced from finite input), smallest
// subnormal 2^-16.
LOFT_HD uint8_t f32_to_fp8_e5m2(float x) { return f32_to_fp8<2, 15, 0x47600000u, 0x7b>(x); }

}  // namespace loft::quant
