// Brute-force reference for the scalar encoders: the code whose decoded value is nearest to x,
// ties to the even code, |x| beyond the largest finite value saturating. Independent of the
// bit-level rounding in engine/quant/fp8.h.
#pragma once
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/quant/quantize.h"
#include "engine/tensor/dtype.h"
#include "engine/tensor/tensor.h"

namespace loft::test {

inline float decode_code(quant::LowpFormat f, uint8_t c) {
  switch (f) {
    case quant::LowpFormat::E4M3:
      return fp8_e4m3_to_f32(c);
    case quant::LowpFormat::E5M2:
      return fp8_e5m2_to_f32(c);
    case quant::LowpFormat::INT8:
      return float(int8_t(c));
  }
  return NAN;
}

inline uint8_t nearest_code(quant::LowpFormat f, float x) {
  if (std::isnan(x)) return f == quant::LowpFormat::INT8 ? 0 : 0x7f;
  float maxv = 0.0f;  // beyond the largest finite value, the encoders saturate
  for (int c = 0; c < 256; ++c)
    if (std::isfinite(decode_code(f, uint8_t(c)))) maxv = std::max(maxv, decode_code(f, uint8_t(c)));
  if (std::fabs(x) > maxv) x = std::copysign(maxv, x);
  int best = -1;
  double best_d = INFINITY;
  for (int c = 0; c < 256; ++c) {
    const float v = decode_code(f, uint8_t(c));
    if (!std::isfinite(v) || (f == quant::LowpFormat::INT8 && c == 0x80)) continue;  // -128 unused
    const bool fp8 = f != quant::LowpFormat::INT8;
    if (fp8 && v == 0.0f && std::signbit(v) != std::signbit(x)) continue;  // keep zero's sign
    const double d = std::fabs(double(v) - double(x));
    const bool even = f == quant::LowpFormat::INT8 ? (int8_t(c) % 2 == 0) : (c % 2 == 0);
    if (d < best_d || (d == best_d && even)) best = c, best_d = d;
  }
  return uint8_t(best);
}

// The raw bytes of a tensor (codes), copied to the host.
inline std::vector<uint8_t> code_bytes(const Tensor& t) {
  const Tensor h = t.to(Device::cpu());
  const auto* p = h.ptr<uint8_t>();
  return std::vector<uint8_t>(p, p + h.nbytes());
}

}  // namespace loft::test
