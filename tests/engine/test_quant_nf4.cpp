// NF4 + double quantization on the CPU: layout (nibble order, partial last block, padding), the
// zero-block guard, a naive reference written here, round-trip error bounds, bits/param, errors.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/quant/nf4.h"
#include "tests/common/test_util.h"
#include "tests/engine/test_quant_nf4_util.h"

namespace loft::test {
namespace {

// Nearest entry by brute force, distances in double, ties to the lower index.
template <size_t N>
uint8_t naive_nearest(const std::array<float, N>& table, float v) {
  size_t best = 0;
  for (size_t k = 1; k < N; ++k)
    if (std::fabs(double(v) - double(table[k])) < std::fabs(double(v) - double(table[best])))
      best = k;
  return uint8_t(best);
}

// The format spelled out directly from docs/methods.md, one element at a time.
Nf4Tensor naive_quantize(const std::vector<float>& x, const Shape& shape) {
  const int64_t n = int64_t(x.size()), nb = (n + 63) / 64, ng = (nb + 255) / 256;
  std::vector<uint8_t> codes(static_cast<size_t>((n + 1) / 2), 0), acodes(static_cast<size_t>(nb));
  std::vector<float> absmax(static_cast<size_t>(nb), 0.0f), scales(static_cast<size_t>(ng), 0.0f);
  for (int64_t i = 0; i < n; ++i) absmax[i / 64] = std::max(absmax[i / 64], std::fabs(x[i]));
  for (int64_t i = 0; i < n; ++i) {
    const float m = absmax[i / 64];
    const uint8_t c = m == 0.0f ? 7 : naive_nearest(kNf4Levels, x[i] / m);
    codes[i / 2] |= (i % 2 == 0) ? uint8_t(c << 4) : c;
  }
  double sum = 0.0;
  for (float a : absmax) sum += a;
  const float offset = float(sum / double(nb));
  for (int64_t b = 0; b < nb; ++b)
    scales[b / 256] = std::max(scales[b / 256], std::fabs(absmax[b] - offset));
  for (int64_t b = 0; b < nb; ++b) {
    const float s = scales[b / 256];
    acodes[b] = naive_nearest(dynamic_map(), s == 0.0f ? 0.0f : (absmax[b] - offset) / s);
  }
  Nf4Tensor q;
  q.shape = shape;
  q.codes = Tensor::from_host(codes.data(), {int64_t(codes.size())}, DType::U8);
  q.absmax_codes = Tensor::from_host(acodes.data(), {nb}, DType::U8);
  q.absmax_scale = Tensor::from_vector(scales, {ng});
  q.absmax_offset = offset;
  return q;
}

const Shape kShapes[] = {{1}, {3}, {7, 13}, {172, 64}, {64, 172}, {300, 64}, {257 * 64 + 3}};

TEST(QuantNf4, MatchesNaiveReferenceOnGaussianWeights) {
  uint32_t seed = 1;
  for (const Shape& shape : kShapes)
    for (float std : {0.02f, 1.0f, 3e-5f}) {
      const std::vector<float> x = nf4_test_values(shape_numel(shape), seed++, std);
      const Nf4Tensor q = quantize_nf4(Tensor::from_vector(x, shape));
      EXPECT_TRUE(same_nf4(q, naive_quantize(x, shape))) << shape_str(shape) << " std " << std;
      // Dequantize: level * fma(map[code], scale, offset), element by element.
      const std::vector<uint8_t> codes = host_values<uint8_t>(q.codes);
      const std::vector<uint8_t> ac = host_values<uint8_t>(q.absmax_codes);
      const std::vector<float> sc = host_values<float>(q.absmax_scale);
      const std::vector<float> deq = dequantize_nf4(q).to_float_vector();
      for (size_t i = 0; i < x.size(); ++i) {
        const int c = (i % 2 == 0) ? codes[i / 2] >> 4 : codes[i / 2] & 15;
        const float a = std::fma(dynamic_map()[ac[i / 64]], sc[i / 64 / 256], q.absmax_offset);
        ASSERT_EQ(deq[i], kNf4Levels[c] * a) << shape_str(shape) << " element " << i;
      }
    }
}

TEST(QuantNf4, LayoutSizesAndNibbleOrder) {
  // absmax 1: 1 -> 15, -1 -> 0, 0 -> 7, 0.5 -> 12 (0.5 < midpoint(0.4407, 0.5626) = 0.5017).
  const Nf4Tensor q = quantize_nf4(Tensor::from_vector(std::vector<float>{1.0f, -1.0f, 0.0f, 0.5f}, {2, 2}));
  EXPECT_EQ(host_values<uint8_t>(q.codes), (std::vector<uint8_t>{0xF0, 0x7C}));
  EXPECT_EQ(q.shape, (Shape{2, 2}));
  EXPECT_EQ(q.n_blocks(), 1);
  EXPECT_EQ(q.absmax_codes.shape(), (Shape{1}));
  EXPECT_EQ(q.absmax_scale.shape(), (Shape{1}));
  EXPECT_EQ(q.codes.dtype(), DType::U8);
  EXPECT_EQ(q.absmax_scale.dtype(), DType::F32);
  EXPECT_EQ(q.absmax_offset, 1.0f);  // one block: the mean is its absmax
  EXPECT_EQ(dequantize_nf4(q).to_float_vector(), (std::vector<float>{1, -1, 0, kNf4Levels[12]}));
}

TEST(QuantNf4, PartialLastBlockUsesOnlyItsElementsAndPadsTheLastNibble) {
  // 69 elements: block 0 holds 64 values up to 8, block 1 five values up to 0.25; odd numel.
  std::vector<float> x(69);
  for (int i = 0; i < 64; ++i) x[i] = 8.0f * float(i - 32) / 32.0f;
  const float tail[5] = {0.25f, -0.125f, 0.0f, 0.0625f, -0.25f};
  std::copy(tail, tail + 5, x.begin() + 64);
  const Nf4Tensor q = quantize_nf4(Tensor::from_vector(x, {3, 23}));
  ASSERT_EQ(q.codes.numel(), 35);
  ASSERT_EQ(q.n_blocks(), 2);
  const std::vector<uint8_t> codes = host_values<uint8_t>(q.codes);
  EXPECT_EQ(codes[34] & 15, kNf4PadCode);
  EXPECT_EQ(codes[34] >> 4, 0);  // -0.25 / 0.25 = -1
  EXPECT_EQ(codes[32], uint8_t(0xF0 | nf4_code(-0.5f)));
  // Double quantization of two absmaxes {8, 0.25}: offset 4.125, differences ±scale 3.875; +1 is
  // in the map (exact), -1 is not (its nearest entry is -0.99296875).
  EXPECT_EQ(q.absmax_offset, 4.125f);
  EXPECT_EQ(host_values<uint8_t>(q.absmax_codes), (std::vector<uint8_t>{255, 0}));
  EXPECT_EQ(nf4_block_absmax(q),
            (std::vector<float>{8.0f, std::fma(-0.99296875f, 3.875f, 4.125f)}));
}

TEST(QuantNf4, AllZeroBlocksCodeZeroAndDecodeToExactZeros) {
  std::vector<float> x = nf4_test_values(5 * 64, 7);
  std::fill_n(x.begin() + 128, 64, 0.0f);
  const Nf4Tensor q = quantize_nf4(Tensor::from_vector(x, {5, 64}));
  const std::vector<uint8_t> codes = host_values<uint8_t>(q.codes);
  for (int i = 64; i < 96; ++i) EXPECT_EQ(codes[i], 0x77) << "byte " << i;
  const std::vector<float> deq = dequantize_nf4(q).to_float_vector();
  for (int i = 128; i < 192; ++i) EXPECT_EQ(deq[i], 0.0f) << "element " << i;

  // A whole zero tensor: absmaxes 0, offset 0, scale 0 (guarded), every absmax code the map's 0.
  const Nf4Tensor z = quantize_nf4(Tensor::zeros({3, 100}, DType::F32));
  EXPECT_EQ(z.absmax_offset, 0.0f);
  EXPECT_EQ(host_values<float>(z.absmax_scale), std::vector<float>{0.0f});
  for (uint8_t c : host_values<uint8_t>(z.absmax_codes)) EXPECT_EQ(c, dynamic_map_code(0.0f));
  for (float v : dequantize_nf4(z).to_float_vector()) ASSERT_EQ(v, 0.0f);
}

// |x - deq| <= absmax·(half the largest level gap) + |absmax - absmax'|, and
// |absmax - absmax'| <= scale·(half the largest map gap), each with fp32 rounding slack.
TEST(QuantNf4, RoundTripErrorWithinTheQuantizationBounds) {
  double nf4_half_gap = 0, map_half_gap = 0;
  for (size_t k = 0; k + 1 < 16; ++k)
    nf4_half_gap = std::max(nf4_half_gap, (double(kNf4Levels[k + 1]) - kNf4Levels[k]) / 2);
  for (size_t k = 0; k + 1 < 256; ++k)
    map_half_gap = std::max(map_half_gap, (double(dynamic_map()[k + 1]) - dynamic_map()[k]) / 2);
  map_half_gap = std::max(map_half_gap, 1.0 + dynamic_map()[0]);  // -1 codes to the smallest
  EXPECT_NEAR(map_half_gap, 0.9 / 128, 1e-7);
  uint32_t seed = 100;
  for (const Shape& shape : kShapes) {
    const std::vector<float> x = nf4_test_values(shape_numel(shape), seed++);
    const Nf4Tensor q = quantize_nf4(Tensor::from_vector(x, shape));
    const std::vector<float> deq = dequantize_nf4(q).to_float_vector();
    const std::vector<float> dq_absmax = nf4_block_absmax(q);
    const std::vector<float> scales = host_values<float>(q.absmax_scale);
    std::vector<double> absmax(dq_absmax.size(), 0.0);
    for (size_t i = 0; i < x.size(); ++i) absmax[i / 64] = std::max(absmax[i / 64], double(std::fabs(x[i])));
    for (size_t b = 0; b < absmax.size(); ++b) {
      const double bound = scales[b / 256] * map_half_gap * (1 + 1e-6) + 1e-6 * absmax[b];
      ASSERT_LE(std::fabs(absmax[b] - dq_absmax[b]), bound) << shape_str(shape) << " block " << b;
    }
    for (size_t i = 0; i < x.size(); ++i) {
      const double a = absmax[i / 64], err = std::fabs(double(x[i]) - deq[i]);
      const double bound = a * nf4_half_gap * (1 + 1e-6) + std::fabs(a - dq_absmax[i / 64]) +
                           1e-6 * a;
      ASSERT_LE(err, bound) << shape_str(shape) << " element " << i;
    }
    EXPECT_LT(rel_error(deq, x), 0.15) << shape_str(shape);  // NF4 on Gaussians: ~0.1
  }
}

TEST(QuantNf4, Bf16InputQuantizesItsValuesAndBf16OutputIsTheRoundedF32) {
  Tensor w = nf4_test_weight({172, 64}, 11);
  std::vector<uint16_t> bits;
  for (float v : w.to_float_vector()) bits.push_back(f32_to_bf16(v));
  const Tensor wb = Tensor::from_host(bits.data(), w.shape(), DType::BF16);
  const Nf4Tensor q = quantize_nf4(wb);
  EXPECT_TRUE(same_nf4(q, quantize_nf4(Tensor::from_vector(wb.to_float_vector(), w.shape()))));
  const std::vector<float> f = dequantize_nf4(q, DType::F32).to_float_vector();
  const std::vector<uint16_t> b = host_values<uint16_t>(dequantize_nf4(q, DType::BF16));
  for (size_t i = 0; i < f.size(); ++i) ASSERT_EQ(b[i], f32_to_bf16(f[i])) << "element " << i;
}

TEST(QuantNf4, BitsPerParamOf4096x4096Is4127) {
  const Nf4Tensor q = quantize_nf4(Tensor::zeros({4096, 4096}, DType::F32));
  // 8 Mi code bytes + 256 Ki absmax codes + 1024 fp32 scales + the fp32 offset.
  EXPECT_EQ(q.nbytes(), size_t(8388608 + 262144 + 4096 + 4));
  EXPECT_NEAR(q.bits_per_param(), 4.127, 0.0005);
  std::printf("NF4 4096x4096: %zu bytes, %.5f bits/param\n", q.nbytes(), q.bits_per_param());
}

TEST(QuantNf4, ToCpuCopiesEveryPart) {
  const Nf4Tensor q = quantize_nf4(nf4_test_weight({64, 172}, 3));
  const Nf4Tensor c = q.to(Device::cpu());
  EXPECT_TRUE(same_nf4(q, c));
  EXPECT_NE(q.codes.data(), c.codes.data());
}

TEST(QuantNf4, BadInputsThrowOneClearError) {
  std::vector<float> x = nf4_test_values(200, 5);
  x[130] = NAN;
  try {
    quantize_nf4(Tensor::from_vector(x, {2, 100}));
    FAIL() << "NaN accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "element 130 (block 2)"));
  }
  x[130] = INFINITY;
  EXPECT_THROW(quantize_nf4(Tensor::from_vector(x, {2, 100})), Error);
  try {
    quantize_nf4(Tensor::from_vector(std::vector<int32_t>{1, 2}, {2}));
    FAIL() << "I32 accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "must be F32 or BF16"));
  }
  EXPECT_THROW(quantize_nf4(Tensor::empty({0, 4}, DType::F32)), Error);
  const Nf4Tensor q = quantize_nf4(nf4_test_weight({4, 64}, 1));
  Tensor wrong = Tensor::empty({64, 4}, DType::F32);
  try {
    dequantize_nf4_into(q, wrong);
    FAIL() << "wrong output shape accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "must be [4, 64]"));
  }
  EXPECT_THROW(dequantize_nf4(q, DType::F16), Error);
  Nf4Tensor broken = q;
  broken.codes = broken.codes.slice(0, 10);
  EXPECT_THROW(dequantize_nf4(broken), Error);
}

}  // namespace
}  // namespace loft::test
