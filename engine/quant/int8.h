// fp32 -> INT8 scalar encoder, usable from host and device code: round to nearest, ties to even,
// saturate at ±127 (the symmetric range; -128 is never produced). NaN has no INT8 code: it maps to 0.
#pragma once
#include <cmath>
#include <cstdint>

#include "engine/quant/fp8.h"  // LOFT_HD

namespace loft::quant {

LOFT_HD int8_t f32_to_int8(float x) {
  if (!(x == x)) return 0;  // NaN
  return int8_t(rintf(fminf(fmaxf(x, -127.0f), 127.0f)));
}

}  // namespace loft::quant
