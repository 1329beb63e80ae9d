// HOT's integer dX GEMM on the CPU reference (engine/methods/hot/hot_gemm.h): the int32 product,
// the pinned epilogue against a double-precision product of the dequantized operands, the s4
// packing, the dX error against INT8 HALO's, and the SR estimator's mean against the exact product.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/methods/hot/hot_gemm.h"
#include "engine/methods/hot/hot_numerics.h"
#include "engine/ops/ops.h"
#include "engine/peft/halo_weight.h"
#include "tests/common/test_util.h"
#include "tests/methods/hot/test_hot_util.h"

namespace loft::quant {
namespace {

// dY [T, out] with a few loud tokens, W [out, in] with a few loud in-channels (Llama-like).
struct Operands {
  Tensor dy, w;
};
Operands llama_like(int64_t t, int64_t out, int64_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  Operands o{test::random_tensor({t, out}, rng), test::random_tensor({out, in}, rng, -0.02f, 0.02f)};
  for (int64_t r = 0; r < t; r += 7)
    for (int64_t c = 0; c < out; ++c) o.dy.ptr<float>()[r * out + c] *= 30.0f;
  for (int64_t c = 3; c < in; c += 29)
    for (int64_t r = 0; r < out; ++r) o.w.ptr<float>()[r * in + c] *= 20.0f;
  return o;
}

// dY·W in double.
std::vector<double> exact_dx(const Tensor& dy, const Tensor& w) {
  const int64_t t = dy.size(0), out = dy.size(1), in = w.size(1);
  std::vector<double> r(size_t(t * in), 0.0);
  for (int64_t a = 0; a < t; ++a)
    for (int64_t o = 0; o < out; ++o) {
      const double g = dy.ptr<float>()[a * out + o];
      for (int64_t i = 0; i < in; ++i) r[size_t(a * in + i)] += g * w.ptr<float>()[o * in + i];
    }
  return r;
}

Tensor hot_dx(const Tensor& dy, const Tensor& w, const HotQuantOptions& opt) {
  const HotCodes a = hot_quantize_dy(dy, opt);
  const HotCodes b = hot_weight_codes(w, opt.bits);
  Tensor dx = Tensor::empty({dy.size(0), w.size(1)}, DType::F32);
  hot_epilogue(hot_igemm(a, b), a, b, nullptr, dx, false);
  return dx;
}

TEST(HotGemm, IntegerProductIsExact) {
  const Operands o = llama_like(19, 176, 40, 1);
  for (int bits : {4, 8}) {
    HotQuantOptions opt;
    opt.bits = bits;
    const HotCodes a = hot_quantize_dy(o.dy, opt), b = hot_weight_codes(o.w, bits);
    const Tensor acc = hot_igemm(a, b);
    ASSERT_EQ(acc.shape(), Shape({a.rows_padded(), b.rows_padded()}));
    const int64_t k = a.k_padded();
    for (int64_t t = 0; t < a.rows_padded(); ++t)
      for (int64_t i = 0; i < b.rows_padded(); ++i) {
        int64_t s = 0;
        for (int64_t x = 0; x < k; ++x)
          s += int64_t(a.codes.ptr<int8_t>()[t * k + x]) * b.codes.ptr<int8_t>()[i * k + x];
        ASSERT_EQ(acc.ptr<int32_t>()[t * b.rows_padded() + i], s);
      }
  }
}

TEST(HotGemm, EpilogueMatchesTheDequantizedProductInDouble) {
  const Operands o = llama_like(9, 64, 24, 2);
  const HotCodes a = hot_quantize_dy(o.dy, {}), b = hot_weight_codes(o.w, 4);
  std::mt19937 rng(3);
  const Tensor lora = test::random_tensor({9, 24}, rng, -0.1f, 0.1f);
  Tensor dx = test::random_tensor({9, 24}, rng);
  const Tensor prev = dx.clone();
  hot_epilogue(hot_igemm(a, b), a, b, &lora, dx, /*accumulate=*/true);
  const int64_t k = a.k_padded();
  for (int64_t t = 0; t < 9; ++t)
    for (int64_t i = 0; i < 24; ++i) {
      double s = 0;
      for (int64_t x = 0; x < 64; ++x)
        s += a.codes.ptr<int8_t>()[t * k + x] * double(a.scale.ptr<float>()[t]) *
             b.codes.ptr<int8_t>()[i * k + x] * double(b.scale.ptr<float>()[i]);
      const double ref = s / 16 + lora.ptr<float>()[t * 24 + i] + prev.ptr<float>()[t * 24 + i];
      EXPECT_NEAR(dx.ptr<float>()[t * 24 + i], ref, 1e-5 * (std::fabs(s / 16) + 1.1));
    }
}

TEST(HotGemm, PackedNibblesAreLowFirstTwosComplement) {
  std::vector<float> v(64 * 2);
  Tensor codes = Tensor::empty({2, 64}, DType::I8);
  for (int64_t i = 0; i < 128; ++i) codes.ptr<int8_t>()[i] = int8_t(int(i % 15) - 7);
  const Tensor p = hot_pack_s4(codes);
  ASSERT_EQ(p.shape(), Shape({2, 32}));
  for (int64_t i = 0; i < 64; ++i) {
    const uint8_t byte = p.ptr<uint8_t>()[i];
    auto nib = [](unsigned n) { return int(n & 8 ? int(n) - 16 : int(n)); };
    EXPECT_EQ(nib(byte & 0xfu), codes.ptr<int8_t>()[2 * i]);
    EXPECT_EQ(nib(byte >> 4), codes.ptr<int8_t>()[2 * i + 1]);
  }
}

// Two measures of dX's error against dY·W in double: the whole tensor's (loud tokens dominate
// it) and the mean over tokens of each token's own relative error (what per-token scales are
// for: the quiet tokens' gradients). HOT at 8 bits RNE must not lose to INT8 HALO on the
// second at any level, nor on the first by more than 10% (HALO level 2 also rotates dY along
// tokens, which spreads the loud tokens: it ties on the whole-tensor measure).
struct DxError {
  double whole, per_token;
};
DxError dx_error(const std::vector<float>& got, const std::vector<double>& ref, int64_t t) {
  const int64_t in = int64_t(ref.size()) / t;
  double num = 0, den = 0, tok = 0;
  for (int64_t r = 0; r < t; ++r) {
    double n2 = 0, d2 = 0;
    for (int64_t i = r * in; i < (r + 1) * in; ++i)
      n2 += (got[size_t(i)] - ref[size_t(i)]) * (got[size_t(i)] - ref[size_t(i)]),
          d2 += ref[size_t(i)] * ref[size_t(i)];
    num += n2, den += d2, tok += std::sqrt(n2 / d2);
  }
  return {std::sqrt(num / den), tok / double(t)};
}

TEST(HotGemm, EightBitNearestHasNoMoreDxErrorThanInt8Halo) {
  const Operands o = llama_like(64, 256, 128, 4);
  const std::vector<double> ref = exact_dx(o.dy, o.w);
  HotQuantOptions opt;
  opt.bits = 8;
  opt.round = HotRound::Nearest;
  const DxError hot = dx_error(hot_dx(o.dy, o.w, opt).to_float_vector(), ref, 64);
  for (int level : {0, 1, 2}) {
    HaloOptions h;
    h.level = level;
    h.format = LowpFormat::INT8;
    const auto halo = halo_weight(WeightSource(o.w), h);
    Tensor dx = Tensor::empty({64, 128}, DType::F32);
    halo->backward_input(o.dy, dx, false);
    const DxError he = dx_error(dx.to_float_vector(), ref, 64);
    EXPECT_LE(hot.per_token, he.per_token) << "HALO int8 level " << level;
    EXPECT_LE(hot.whole, 1.1 * he.whole) << "HALO int8 level " << level;
    std::printf("dX error (whole, per token): hot int8 rne %.3e %.3e; halo int8 level %d %.3e %.3e\n",
                hot.whole, hot.per_token, level, he.whole, he.per_token);
  }
  opt.bits = 4;
  opt.round = HotRound::Stochastic;
  const DxError h4 = dx_error(hot_dx(o.dy, o.w, opt).to_float_vector(), ref, 64);
  std::printf("dX error (whole, per token): hot int4 sr %.3e %.3e\n", h4.whole, h4.per_token);
}

TEST(HotGemm, StochasticDxIsAnUnbiasedEstimateOfTheProductWithQuantizedW) {
  // E[dX] = dY·H·deq(Q(Hᵀ·W))/16 exactly (only dY is rounded stochastically).
  const int64_t t = 16, out = 64, in = 32;
  const Operands o = llama_like(t, out, in, 5);
  const HotCodes b = hot_weight_codes(o.w, 4);
  Tensor wq = Tensor::empty({out, in}, DType::F32);  // H·deq(codes)ᵀ/16: the W the estimator sees
  for (int64_t oo = 0; oo < out; ++oo)
    for (int64_t i = 0; i < in; ++i) {
      double s = 0;
      for (int j = 0; j < 16; ++j) {
        const int64_t r = oo / 16 * 16 + j;
        const double h = (__builtin_popcount(unsigned((oo % 16) & j)) & 1) ? -1 : 1;
        s += h * b.codes.ptr<int8_t>()[i * b.k_padded() + r] * double(b.scale.ptr<float>()[i]);
      }
      wq.ptr<float>()[oo * in + i] = float(s / 16);
    }
  const std::vector<double> ref = exact_dx(o.dy, wq);
  test::Draws draws(ref.size());
  for (int s = 0; s < 2000; ++s) {
    HotQuantOptions opt;
    opt.seed = uint64_t(s) + 100;
    draws.add(hot_dx(o.dy, o.w, opt).to_float_vector());
  }
  EXPECT_TRUE(draws.unbiased_against(ref));
}

TEST(HotGemm, RejectsMismatchedOperands) {
  const Operands o = llama_like(4, 32, 16, 6);
  const HotCodes a = hot_quantize_dy(o.dy, {});
  EXPECT_THROW(hot_igemm(a, hot_weight_codes(o.w, 8)), Error);
  const Operands p = llama_like(4, 48, 16, 6);
  EXPECT_THROW(hot_igemm(a, hot_weight_codes(p.w, 4)), Error);
  HotCodes packed_only = hot_weight_codes(o.w, 4);
  packed_only.packed = hot_pack_s4(packed_only.codes);
  packed_only.codes = Tensor();
  EXPECT_THROW(hot_igemm(a, packed_only, HotGemmPath::Int8), Error);
}

}  // namespace
}  // namespace loft::quant
