#include "engine/tensor/dtype.h"

#include <cmath>

#include "engine/core/error.h"

namespace loft {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
  bool is_float;
};
constexpr DTypeInfo kInfo[] = {
    {DType::F32, "F32", 4, true},          {DType::F16, "F16", 2, true},
    {DType::BF16, "BF16", 2, true},        {DType::F8_E4M3, "F8_E4M3", 1, true},
    {DType::F8_E5M2, "F8_E5M2", 1, true},  {DType::I8, "I8", 1, false},
    {DType::U8, "U8", 1, false},           {DType::I32, "I32", 4, false},
    {DType::I64, "I64", 8, false},
};
const DTypeInfo& info(DType t) {
  for (const auto& i : kInfo)
    if (i.type == t) return i;
  throw Error(cat("unknown dtype code ", int(t)));
}
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }
bool is_float(DType t) { return info(t).is_float; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.name == name) return i.type;
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float v;
  if (exp == 0)
    v = std::ldexp(float(man), -24);  // zero or subnormal
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = std::ldexp(float(man | 0x400u), int(exp) - 25);
  return sign ? -v : v;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {                        // below the smallest normal 2^-14: subnormal
    float a;
    std::memcpy(&a, &abs, 4);
    // nearbyint rounds half to even under the default rounding mode.
    return sign | uint16_t(std::nearbyint(a * 16777216.0f));  // a / 2^-24
  }
  uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u);  // round mantissa to 10 bits, ties to even
  return sign | uint16_t(((r >> 13) - (112u << 10)) & 0x7fffu);
}

float fp8_e4m3_to_f32(uint8_t b) {
  const uint32_t exp = (b >> 3) & 0xfu, man = b & 0x7u;
  float v;
  if (exp == 15 && man == 7)
    v = NAN;
  else if (exp == 0)
    v = std::ldexp(float(man), -9);  // subnormal: man/8 * 2^-6
  else
    v = std::ldexp(float(man | 0x8u), int(exp) - 10);  // (1 + man/8) * 2^(exp-7)
  return (b & 0x80u) ? -v : v;
}

float fp8_e5m2_to_f32(uint8_t b) {
  const uint32_t exp = (b >> 2) & 0x1fu, man = b & 0x3u;
  float v;
  if (exp == 31)
    v = man ? NAN : INFINITY;
  else if (exp == 0)
    v = std::ldexp(float(man), -16);  // subnormal: man/4 * 2^-14
  else
    v = std::ldexp(float(man | 0x4u), int(exp) - 17);  // (1 + man/4) * 2^(exp-15)
  return (b & 0x80u) ? -v : v;
}

}  // namespace loft
