// Tensor encodings: Q8_0 against a CPU reference of ggml's quantize_row_q8_0_ref, and the exact
// F16 / BF16 conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/core/error.h"
#include "engine/tensor/dtype.h"
#include "export/gguf/gguf_encode.h"

namespace loft::gguf {
namespace {

// ggml's reference, written out per block: d = amax / 127 stored as fp16, qs = roundf(x * (1/d)).
std::vector<uint8_t> q8_reference(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[b * 32 + j]));
    const float d = amax / 127;
    const float id = d == 0 ? 0.0f : 1 / d;
    const uint16_t h = f32_to_f16(d);
    out.push_back(uint8_t(h & 0xff));
    out.push_back(uint8_t(h >> 8));
    for (size_t j = 0; j < 32; ++j) out.push_back(uint8_t(int8_t(std::roundf(x[b * 32 + j] * id))));
  }
  return out;
}

TEST(GgufEncode, Q8_0MatchesTheReferenceOnAwkwardData) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const auto& [rows, cols] : {std::pair{1, 32}, {3, 64}, {5, 96}, {7, 160}, {2, 4096}}) {
    std::vector<float> x(size_t(rows * cols));
    for (float& v : x) v = normal(rng) * std::pow(10.0f, float(int(rng() % 7)) - 3);
    std::fill_n(x.begin(), 32, 0.0f);                    // an all-zero block: d = 0, qs = 0
    if (x.size() >= 64) x[40] = -1e-30f;                 // a tiny block max (fp16 scale underflows)
    if (x.size() >= 96) for (int j = 64; j < 96; ++j) x[size_t(j)] = float(j - 80) * 0.5f;  // ties of x/d
    const std::vector<uint8_t> got = encode_tensor(TensorType::Q8_0, x, cols);
    ASSERT_EQ(got.size(), x.size() / 32 * 34);
    EXPECT_EQ(got, q8_reference(x)) << rows << "x" << cols;
    const std::vector<float> back = decode_tensor(TensorType::Q8_0, got);
    for (size_t b = 0; b < x.size() / 32; ++b) {
      uint16_t h;
      std::memcpy(&h, &got[b * 34], 2);
      // Rounding to the nearest step of d, plus up to 127 times the fp16 rounding of d.
      float amax = 0;
      for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[b * 32 + j]));
      const float d = amax / 127, d16 = f16_to_f32(h);
      const float bound = 0.5f * d + 127 * std::abs(d16 - d) + 1e-6f * d + 1e-30f;
      for (size_t j = 0; j < 32; ++j) EXPECT_LE(std::abs(back[b * 32 + j] - x[b * 32 + j]), bound);
    }
  }
}

TEST(GgufEncode, Q8_0HandComputedBlock) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[size_t(j)] = float(j - 16);  // amax 16: d = 16/127, q = round(x * 127/16)
  const std::vector<uint8_t> got = encode_tensor(TensorType::Q8_0, x, 32);
  uint16_t h;
  std::memcpy(&h, got.data(), 2);
  EXPECT_EQ(h, f32_to_f16(16.0f / 127.0f));
  EXPECT_EQ(int8_t(got[2]), -127);       // -16
  EXPECT_EQ(int8_t(got[2 + 16]), 0);     // 0
  EXPECT_EQ(int8_t(got[2 + 17]), 8);     // 1 * 7.9375 -> 8
  EXPECT_EQ(int8_t(got[2 + 31]), 119);   // 15 * 7.9375 = 119.06 -> 119
}

TEST(GgufEncode, HalfAndBfloatAreRoundToNearestEven) {
  const std::vector<float> x{1.0f, -2.5f, 65504.0f, 1e-8f, 3.14159265f, 1.00048828125f /* f16 tie */};
  const std::vector<uint8_t> f16 = encode_tensor(TensorType::F16, x, 3);
  const std::vector<uint8_t> bf16 = encode_tensor(TensorType::BF16, x, 3);
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t a, b;
    std::memcpy(&a, &f16[2 * i], 2);
    std::memcpy(&b, &bf16[2 * i], 2);
    EXPECT_EQ(a, f32_to_f16(x[i]));
    EXPECT_EQ(b, f32_to_bf16(x[i]));
  }
  uint16_t tie;
  std::memcpy(&tie, &f16[10], 2);
  EXPECT_EQ(tie, 0x3C00);  // 1 + 2^-11 rounds to even (1.0)
  EXPECT_EQ(decode_tensor(TensorType::F32, encode_tensor(TensorType::F32, x, 2)), x);
  EXPECT_THROW(encode_tensor(TensorType::Q8_0, x, 6), Error);
  EXPECT_THROW(encode_tensor(TensorType::Q4_0, x, 6), Error);
}

}  // namespace
}  // namespace loft::gguf
