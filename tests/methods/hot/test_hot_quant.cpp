// HOT's quantizers on the CPU reference (engine/methods/hot/hot_quant.h, hot_numerics.h): Philox's
// known answers, the FWHT16 against the Hadamard matrix, the SR draw's counter layout (one Philox
// draw per aligned quad, word j for element j) and stochastic rounding's unbiasedness, the
// RNE option, dY and W codes, padding and the overflow flag.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/methods/hot/hot_numerics.h"
#include "engine/methods/hot/hot_quant.h"
#include "tests/common/test_util.h"

namespace loft::quant {
namespace {

// H16[i][j] = (-1)^popcount(i & j): Sylvester's natural order.
double h16(int i, int j) { return (__builtin_popcount(unsigned(i & j)) & 1) ? -1.0 : 1.0; }

// z = dY·H_b per row in double, with H_b block-diagonal (blocks of b along the row).
std::vector<double> rotate_ref(const std::vector<float>& x, int64_t rows, int64_t n, int b) {
  std::vector<double> z(size_t(rows * n));
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t o = 0; o < n; ++o) {
      const int64_t base = o / b * b;
      double s = 0;
      for (int j = 0; j < b; ++j) s += h16(int(o - base), j) * x[size_t(t * n + base + j)];
      z[size_t(t * n + o)] = s;
    }
  return z;
}

TEST(HotPhilox, KnownAnswers) {
  // Random123's kat_vectors for philox4x32_10.
  auto r = philox::philox4x32_10(0, 0, 0, 0, 0, 0);
  const uint32_t* w = r.w;
  EXPECT_EQ(w[0], 0x6627e8d5u);
  EXPECT_EQ(w[1], 0xe169c58du);
  EXPECT_EQ(w[2], 0xbc57ac4cu);
  EXPECT_EQ(w[3], 0x9b00dbd8u);
  r = philox::philox4x32_10(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  EXPECT_EQ(w[0], 0x408f276du);
  EXPECT_EQ(w[1], 0x41c83b0eu);
  EXPECT_EQ(w[2], 0xa20bc7c6u);
  EXPECT_EQ(w[3], 0x6d5451fdu);
  r = philox::philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u,
                            0x299f31d0u);
  EXPECT_EQ(w[0], 0xd16cfe09u);
  EXPECT_EQ(w[1], 0x94fdccebu);
  EXPECT_EQ(w[2], 0x5001e420u);
  EXPECT_EQ(w[3], 0x24126ea1u);
}

TEST(HotFwht, MatchesTheHadamardMatrixAndIsAnInvolutionUpToSixteen) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  for (int b : {1, 2, 4, 8, 16}) {
    for (int trial = 0; trial < 200; ++trial) {
      float v[16], x[16];
      double mag = 0;
      for (int j = 0; j < 16; ++j) x[j] = v[j] = d(rng), mag += std::fabs(x[j]);
      hot::fwht_group(v, b);
      for (int o = 0; o < 16; ++o) {
        const int base = o / b * b;
        double ref = 0;
        for (int j = 0; j < b; ++j) ref += h16(o - base, j) * x[base + j];
        EXPECT_NEAR(v[o], ref, 8 * mag * 0x1p-24) << "b=" << b << " o=" << o;
      }
      hot::fwht_group(v, b);
      for (int j = 0; j < 16; ++j) EXPECT_NEAR(v[j], b * x[j], 16 * b * mag * 0x1p-24);
    }
  }
}

TEST(HotFwht, BlockIsTheLargestPowerOfTwoUpToSixteen) {
  EXPECT_EQ(hot::hadamard_block(4096), 16);
  EXPECT_EQ(hot::hadamard_block(11008), 16);
  EXPECT_EQ(hot::hadamard_block(172), 4);
  EXPECT_EQ(hot::hadamard_block(24), 8);
  EXPECT_EQ(hot::hadamard_block(7), 1);
}

TEST(HotRounding, StochasticRoundingIsUnbiasedOverSeeds) {
  const int kSeeds = 10000;
  for (float v : {2.3f, -0.7f, 6.999f, -6.5f, 0.01f, 3.0f, -7.0f}) {
    double sum = 0;
    for (int s = 0; s < kSeeds; ++s)
      sum += hot::sr_code(v, hot::sr_bits(uint64_t(s) * 0x9E3779B97F4A7C15ull, 5, 9, 3), 7.0f);
    const double f = std::fabs(v) - std::floor(std::fabs(v));
    const double sigma = std::sqrt(f * (1 - f) / kSeeds);
    EXPECT_NEAR(sum / kSeeds, v, 4 * sigma + 1e-6) << "v=" << v;
  }
}

TEST(HotRounding, OneDrawServesFourConsecutiveElementsWordByWord) {
  // Element i takes word i % 4 of the draw at counter (i / 4 lo, i / 4 hi, step, site), so the four
  // elements of a quad get four different words and the next quad a fresh draw.
  const uint64_t seed = 0x0123456789abcdefull;
  for (uint64_t quad : {uint64_t(0), uint64_t(1), uint64_t(12345), (uint64_t(1) << 32) + 7}) {
    const philox::Words w = philox::philox4x32_10(uint32_t(quad), uint32_t(quad >> 32), 9, 3,
                                                  uint32_t(seed), uint32_t(seed >> 32));
    for (uint64_t j = 0; j < 4; ++j)
      EXPECT_EQ(hot::sr_bits(seed, 4 * quad + j, 9, 3), w.w[j] >> 8) << "quad " << quad << " j " << j;
    EXPECT_NE(hot::sr_bits(seed, 4 * quad, 9, 3), hot::sr_bits(seed, 4 * quad + 1, 9, 3));
    EXPECT_NE(hot::sr_bits(seed, 4 * quad + 3, 9, 3), hot::sr_bits(seed, 4 * quad + 4, 9, 3));
  }
}

TEST(HotRounding, StochasticRoundingIsUnbiasedInEveryWordOfTheDraw) {
  // The same value at the four positions of a quad (each uses its own word) over many seeds.
  const int kSeeds = 10000;
  for (float v : {2.3f, -0.7f, 0.01f}) {
    const double f = std::fabs(v) - std::floor(std::fabs(v));
    const double sigma = std::sqrt(f * (1 - f) / kSeeds);
    for (uint64_t j = 0; j < 4; ++j) {
      double sum = 0;
      for (int s = 0; s < kSeeds; ++s)
        sum += hot::sr_code(v, hot::sr_bits(uint64_t(s) * 0x9E3779B97F4A7C15ull, 40 + j, 9, 3), 7.0f);
      EXPECT_NEAR(sum / kSeeds, v, 4 * sigma + 1e-6) << "v=" << v << " word " << j;
    }
  }
}

TEST(HotRounding, NearestIsTiesToEvenAndClamped) {
  EXPECT_EQ(hot::rne_code(2.5f, 7), 2);
  EXPECT_EQ(hot::rne_code(3.5f, 7), 4);
  EXPECT_EQ(hot::rne_code(-2.5f, 7), -2);
  EXPECT_EQ(hot::rne_code(7.0000005f, 7), 7);
  EXPECT_EQ(hot::rne_code(-130.0f, 127), -127);
  // SR never leaves the range either, and integers stay put without a draw.
  EXPECT_EQ(hot::sr_code(7.0000005f, 0, 7), 7);
  EXPECT_EQ(hot::dy_code(-4.0f, 7, true, 1, 2, 3, 4), -4);
}

Tensor bf16_values(const Shape& shape, std::mt19937& rng, float scale = 1.0f) {
  Tensor t = test::random_tensor(shape, rng, -scale, scale);
  float* p = t.ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = bf16_to_f32(f32_to_bf16(p[i]));
  return t;
}

TEST(HotQuantizeDy, CodesAreWithinOneStepOfTheRotatedValues) {
  std::mt19937 rng(2);
  for (int64_t n : {16, 64, 172, 200}) {
    const int64_t rows = 5;
    Tensor dy = bf16_values({rows, n}, rng);
    dy.ptr<float>()[3] = 40.0f;  // a token outlier in row 0
    const std::vector<float> x = dy.to_float_vector();
    const int b = hot::hadamard_block(n);
    const std::vector<double> z = rotate_ref(x, rows, n, b);
    for (HotScale sc : {HotScale::PerToken, HotScale::PerTensor})
      for (HotRound rd : {HotRound::Stochastic, HotRound::Nearest})
        for (int bits : {4, 8}) {
          HotQuantOptions opt;
          opt.bits = bits, opt.scale = sc, opt.round = rd, opt.seed = 7;
          const HotCodes q = hot_quantize_dy(dy, opt);
          ASSERT_EQ(q.codes.shape(), Shape({16, hot::round_up(n, 128)}));
          const float qmax = hot::qmax_for(bits);
          const int8_t* c = q.codes.ptr<int8_t>();
          const float* s = q.scale.ptr<float>();
          for (int64_t t = 0; t < q.rows_padded(); ++t) {
            if (t >= rows) {
              EXPECT_EQ(s[t], 0.0f);
              for (int64_t o = 0; o < q.k_padded(); ++o) ASSERT_EQ(c[t * q.k_padded() + o], 0);
              continue;
            }
            if (sc == HotScale::PerTensor) EXPECT_EQ(s[t], s[0]);
            int maxcode = 0;
            for (int64_t o = 0; o < q.k_padded(); ++o) {
              const int code = c[t * q.k_padded() + o];
              ASSERT_LE(std::abs(code), qmax);
              maxcode = std::max(maxcode, std::abs(code));
              if (o >= n) {
                ASSERT_EQ(code, 0);
                continue;
              }
              const double err = std::fabs(code * double(s[t]) - z[size_t(t * n + o)]);
              const double tol = (rd == HotRound::Nearest ? 0.5 : 1.0) * s[t] * (1 + 1e-5);
              ASSERT_LE(err, tol) << "n=" << n << " t=" << t << " o=" << o;
            }
            if (sc == HotScale::PerToken) EXPECT_EQ(maxcode, int(qmax)) << "the amax maps to ±qmax";
          }
        }
  }
}

TEST(HotQuantizeDy, SeedsStepsAndSitesDrawDifferentBitsAndRepeatExactly) {
  std::mt19937 rng(3);
  const Tensor dy = bf16_values({8, 256}, rng);
  HotQuantOptions opt;
  opt.seed = 11;
  auto codes = [&](HotQuantOptions o) { return hot_quantize_dy(dy, o).codes.to_int_vector(); };
  const auto base = codes(opt);
  EXPECT_EQ(base, codes(opt));
  HotQuantOptions o2 = opt;
  o2.step = 1;
  EXPECT_NE(base, codes(o2));
  o2 = opt;
  o2.site = hot_site(0, 1, hot::kStreamGx);
  EXPECT_NE(base, codes(o2));
  o2 = opt;
  o2.seed = 12;
  EXPECT_NE(base, codes(o2));
}

TEST(HotQuantizeDy, DequantizedMeanOverSeedsIsTheRotatedValue) {
  std::mt19937 rng(4);
  const int64_t rows = 3, n = 48;
  const Tensor dy = bf16_values({rows, n}, rng);
  const std::vector<double> z = rotate_ref(dy.to_float_vector(), rows, n, 16);
  std::vector<double> mean(size_t(rows * n), 0.0);
  const int kSeeds = 10000;
  for (int s = 0; s < kSeeds; ++s) {
    HotQuantOptions opt;
    opt.seed = uint64_t(s);
    const HotCodes q = hot_quantize_dy(dy, opt);
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t o = 0; o < n; ++o)
        mean[size_t(t * n + o)] += q.codes.ptr<int8_t>()[t * q.k_padded() + o] *
                                   double(q.scale.ptr<float>()[t]) / kSeeds;
  }
  const HotCodes q = hot_quantize_dy(dy, {});
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t o = 0; o < n; ++o)  // σ of one draw ≤ step/2, of the mean ≤ step/200
      EXPECT_NEAR(mean[size_t(t * n + o)], z[size_t(t * n + o)], 4 * q.scale.ptr<float>()[t] / 200);
}

TEST(HotQuantizeDy, NanOrInfRaisesTheFlagAndPoisonsOnlyItsScaleGroup) {
  std::mt19937 rng(5);
  Tensor dy = bf16_values({4, 32}, rng);
  dy.ptr<float>()[32 + 5] = std::nanf("");
  dy.ptr<float>()[64 + 1] = INFINITY;
  Tensor flag = Tensor::zeros({1}, DType::I32);
  HotCodes q = hot_quantize_dy(dy, {}, &flag);
  EXPECT_EQ(flag.ptr<int32_t>()[0], 1);
  const float* s = q.scale.ptr<float>();
  EXPECT_TRUE(std::isfinite(s[0]) && std::isfinite(s[3]));
  EXPECT_TRUE(std::isnan(s[1]) && std::isnan(s[2]));
  for (int64_t o = 0; o < q.k_padded(); ++o) EXPECT_EQ(q.codes.ptr<int8_t>()[q.k_padded() + o], 0);
  HotQuantOptions tensor;
  tensor.scale = HotScale::PerTensor;
  q = hot_quantize_dy(dy, tensor);
  for (int64_t t = 0; t < 4; ++t) EXPECT_TRUE(std::isnan(q.scale.ptr<float>()[t]));
  Tensor clean = bf16_values({4, 32}, rng);
  flag.zero_();
  hot_quantize_dy(clean, {}, &flag);
  EXPECT_EQ(flag.ptr<int32_t>()[0], 0);
}

TEST(HotQuantizeDy, ZeroRowsGiveZeroCodesAndScale) {
  const Tensor dy = Tensor::zeros({2, 64}, DType::F32);
  const HotCodes q = hot_quantize_dy(dy, {});
  EXPECT_EQ(q.scale.ptr<float>()[0], 0.0f);
  for (int64_t v : q.codes.to_int_vector()) ASSERT_EQ(v, 0);
}

TEST(HotWeightCodes, PerInChannelAbsmaxOfTheRotatedStrips) {
  std::mt19937 rng(6);
  for (int64_t out : {32, 172, 48}) {
    const int64_t in = 24;
    Tensor w = bf16_values({out, in}, rng, 0.05f);
    w.ptr<float>()[7] = 1.5f;  // an outlier in-channel (column 7)
    const std::vector<float> x = w.to_float_vector();
    const int b = hot::hadamard_block(out);
    // Rotate the columns: transpose, rotate rows, compare.
    std::vector<float> wt(size_t(in * out));
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) wt[size_t(i * out + o)] = x[size_t(o * in + i)];
    const std::vector<double> z = rotate_ref(wt, in, out, b);
    for (int bits : {4, 8}) {
      const HotCodes q = hot_weight_codes(w, bits);
      ASSERT_EQ(q.rows, in);
      ASSERT_EQ(q.cols, out);
      const float qmax = hot::qmax_for(bits);
      for (int64_t i = 0; i < in; ++i) {
        double amax = 0;
        for (int64_t o = 0; o < out; ++o) amax = std::max(amax, std::fabs(z[size_t(i * out + o)]));
        const float s = q.scale.ptr<float>()[i];
        EXPECT_NEAR(s, amax / qmax, 1e-6 * amax) << "in-channel " << i;
        for (int64_t o = 0; o < out; ++o) {
          const int code = q.codes.ptr<int8_t>()[i * q.k_padded() + o];
          ASSERT_LE(std::fabs(code * double(s) - z[size_t(i * out + o)]), 0.5 * s * (1 + 1e-5));
        }
      }
      EXPECT_GT(q.scale.ptr<float>()[7], 5 * q.scale.ptr<float>()[6]) << "the outlier stays local";
    }
  }
}

TEST(HotQuantizeDy, RejectsBadBitsAndShapes) {
  HotQuantOptions opt;
  opt.bits = 5;
  EXPECT_THROW(hot_quantize_dy(Tensor::zeros({2, 16}, DType::F32), opt), Error);
  EXPECT_THROW(hot_quantize_dy(Tensor::zeros({16}, DType::F32), {}), Error);
  EXPECT_THROW(hot_weight_codes(Tensor::zeros({16, 4}, DType::I32), 4), Error);
}

}  // namespace
}  // namespace loft::quant
