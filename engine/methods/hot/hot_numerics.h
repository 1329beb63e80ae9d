// HOT's scalar numerics (docs/hot.md §8.2), shared word for word by the CPU reference (hot_quant.cpp,
// hot_gemm.cpp) and the CUDA kernels (cuda/hot_*.cu), so that both give the same bits:
//  - FWHT over blocks of b (16, or the largest power of two dividing `out` when that is less, as
//    the reference code's make_hadamard does) in the fixed stage order h = 1, 2, 4, 8, butterfly
//    (a, b) -> (a + b, a - b), natural order; one 16-element group is one unit of work;
//  - the step from an amax (compared as bit patterns, so NaN ranks above +inf), the stochastic
//    rounding draw (Philox4x32-10, one draw per aligned quad of elements, word j >> 8 for its
//    element j) and the RNE option;
//  - the epilogue: m = s_t·s_w, m = m·(1/b), dx = (float)acc·m, then + dx_lora, then + dx_prev.
// Every product and sum is one IEEE round-to-nearest operation; on CUDA the _rn intrinsics keep
// nvcc from contracting them, on the host these TUs build with -ffp-contract=off.
#pragma once
#include <cmath>
#include <cstdint>

#include "engine/quant/fp8.h"  // LOFT_HD, float_bits, bits_float
#include "engine/quant/philox.h"

namespace loft::quant::hot {

constexpr int kGroup = 16;         // codes per FWHT group (one CUDA thread's unit of work)
constexpr int64_t kKAlign = 128;   // K (= out) padded to this: BK of the packed-s4 GEMM
constexpr int64_t kRowAlign = 16;  // GEMM rows (tokens, in-channels) padded to this
constexpr uint32_t kInfBits = 0x7f800000u;

// RNG stream numbers of the counter's last word (docs/hot.md §8.2).
enum Stream : uint32_t { kStreamGx = 0, kStreamAbc = 1, kStreamLqs = 2, kStreamDropout = 3 };

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Hadamard block along out: min(16, largest power of two dividing out).
inline int hadamard_block(int64_t out) {
  int b = 1;
  while (b < kGroup && out % (2 * b) == 0) b *= 2;
  return b;
}

LOFT_HD float qmax_for(int bits) { return bits == 8 ? 127.0f : 7.0f; }

LOFT_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
LOFT_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
LOFT_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// In place over v's 16/b blocks of b consecutive values (b = 1, 2, 4, 8 or 16).
LOFT_HD void fwht_group(float (&v)[kGroup], int b) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int h = 1; h < kGroup; h <<= 1) {
    if (h >= b) break;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int i = 0; i < kGroup; ++i) {
      if (i & h) continue;
      const float x = v[i], y = v[i + h];
      v[i] = add_rn(x, y);
      v[i + h] = x - y;  // a lone subtraction: nothing to contract
    }
  }
}

// |x| as bits: for non-negative floats the integer order is the float order, NaN above +inf.
LOFT_HD uint32_t abs_bits(float x) { return float_bits(x) & 0x7fffffffu; }

// The quantization step of one scale group, from its amax bits.
struct Step {
  float s;    // dequantization step amax/qmax: 0 for an all-zero group, NaN on overflow
  float inv;  // qmax/amax, the multiplier to codes: 0 whenever codes must be 0
};
LOFT_HD Step step_for(uint32_t amax_bits, float qmax) {
  if (amax_bits >= kInfBits) return {bits_float(0x7fc00000u), 0.0f};  // NaN/Inf: poison dx
  const float a = bits_float(amax_bits);
  if (a == 0.0f) return {0.0f, 0.0f};
  const float inv = div_rn(qmax, a);
  // A subnormal amax whose inverse overflows: the group is below anything a gradient carries.
  if (!(float_bits(inv) < kInfBits)) return {0.0f, 0.0f};
  return {div_rn(a, qmax), inv};
}

// v = z·inv, the value rounded to a code; 0 for a group whose codes are 0 (its z may be NaN).
LOFT_HD float to_code_units(float z, Step st) { return st.inv == 0.0f ? 0.0f : mul_rn(z, st.inv); }

// The stochastic rounding draw of quad `quad` (codes 4·quad .. 4·quad + 3 of the codes tensor
// quantized at (step, site) under `seed`, rows k_padded long, so a quad never straddles two rows):
// Philox4x32-10 at key (seed lo, seed hi), counter (quad lo, quad hi, step, site). Word j serves
// code 4·quad + j (docs/hot.md §8.2 draws once per element and keeps word 0; one draw per four elements
// is a quarter of the work, which bounded the quantizer: docs/methods.md).
LOFT_HD philox::Words sr_draw(uint64_t seed, uint64_t quad, uint32_t step, uint32_t site) {
  return philox::philox4x32_10(uint32_t(quad), uint32_t(quad >> 32), step, site, uint32_t(seed),
                               uint32_t(seed >> 32));
}

// 24 uniform bits for code `index`: word index % 4 of its quad's draw, >> 8.
LOFT_HD uint32_t sr_bits(uint64_t seed, uint64_t index, uint32_t step, uint32_t site) {
  return sr_draw(seed, index >> 2, step, site).w[index & 3] >> 8;
}

// sign(v)·(floor|v| + [u < trunc(frac|v|·2^24)]), clamped to ±qmax (v can pass qmax by an ulp).
LOFT_HD int32_t sr_code(float v, uint32_t u24, float qmax) {
  const float m = fabsf(v), fl = floorf(m);
  const float f = m - fl;                                  // exact
  const uint32_t thr = uint32_t(mul_rn(f, 16777216.0f));  // exact scaling, then truncation
  const float q = fminf(fl + (u24 < thr ? 1.0f : 0.0f), qmax);
  return v < 0.0f ? -int32_t(q) : int32_t(q);
}

LOFT_HD int32_t rne_code(float v, float qmax) {
  return int32_t(fminf(fmaxf(rintf(v), -qmax), qmax));
}

// The code of v = z·inv for code `index` (t·k_padded + o): stochastic (drawing only when v has a fraction, which
// gives sr_code's result either way) or nearest-even.
LOFT_HD int32_t dy_code(float v, float qmax, bool stochastic, uint64_t seed, uint64_t index,
                        uint32_t step, uint32_t site) {
  if (!stochastic) return rne_code(v, qmax);
  if (v == floorf(v)) return int32_t(fminf(fmaxf(v, -qmax), qmax));
  return sr_code(v, sr_bits(seed, index, step, site), qmax);
}

LOFT_HD float int_to_float(int32_t x) {
#if defined(__CUDA_ARCH__)
  return __int2float_rn(x);
#else
  return float(x);
#endif
}

// The base term (float)acc·(s_t·s_w·(1/b)).
LOFT_HD float dx_base(int32_t acc, float s_t, float s_w, float inv_block) {
  const float m = mul_rn(mul_rn(s_t, s_w), inv_block);
  return mul_rn(int_to_float(acc), m);
}

}  // namespace loft::quant::hot
