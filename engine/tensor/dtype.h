// Element types loft stores and computes with, and exact scalar conversions between them.
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace loft {

enum class DType : uint8_t { F32, F16, BF16, F8_E4M3, F8_E5M2, I8, U8, I32, I64 };

size_t dtype_size(DType t);
// Safetensors spelling ("F32", "BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
bool is_float(DType t);

// bf16 / fp16 <-> fp32. Rounding is round-to-nearest-even; NaN stays NaN.
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// FP8 -> fp32 (exact). E4M3 is the "fn" variant (OCP/NVIDIA): no infinities, S.1111.111 is NaN,
// max 448. E5M2 follows IEEE: exponent 31 is inf (mantissa 0) or NaN, max 57344.
float fp8_e4m3_to_f32(uint8_t b);
float fp8_e5m2_to_f32(uint8_t b);

}  // namespace loft
