// gemm_lowp on the CPU (the reference the CUDA paths are compared to): against a double-precision
// triple loop over the decoded codes, for each format pair, at awkward shapes; and its errors.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "engine/quant/lowp_gemm.h"
#include "engine/quant/quantize.h"
#include "tests/common/test_util.h"
#include "tests/engine/test_quant_fp8_reference.h"

namespace loft {
namespace {

using quant::LowpFormat;

std::vector<float> naive(const quant::QuantizedTensor& a, const quant::QuantizedTensor& b,
                         float alpha) {
  const int64_t m = a.codes.size(0), n = b.codes.size(0), k = a.codes.size(1);
  const auto* ac = a.codes.ptr<uint8_t>();
  const auto* bc = b.codes.ptr<uint8_t>();
  const double f = double(alpha) * *a.scale.ptr<float>() * *b.scale.ptr<float>();
  std::vector<float> c(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += double(test::decode_code(a.format, ac[i * k + p])) *
             test::decode_code(b.format, bc[j * k + p]);
      c[size_t(i * n + j)] = float(s * f);
    }
  return c;
}

struct Pair {
  LowpFormat a, b;
};

class QuantFp8Gemm : public ::testing::TestWithParam<Pair> {};

TEST_P(QuantFp8Gemm, MatchesDecodedTripleLoop) {
  std::mt19937 rng(21);
  const struct { int64_t m, n, k; } shapes[] = {{1, 1, 1}, {7, 5, 3}, {172, 33, 172}, {16, 48, 32}};
  for (const auto& s : shapes) {
    const auto a = quant::quantize(test::random_tensor({s.m, s.k}, rng, -2.0f, 2.0f), GetParam().a);
    const auto b = quant::quantize(test::random_tensor({s.n, s.k}, rng, -0.1f, 0.1f), GetParam().b);
    Tensor c = Tensor::empty({s.m, s.n}, DType::F32);
    quant::gemm_lowp(a.codes, a.scale, b.codes, b.scale, c, {.alpha = 0.5f});
    EXPECT_LT(test::rel_error(c.to_float_vector(), naive(a, b, 0.5f)), 1e-6)
        << s.m << "x" << s.n << "x" << s.k;
  }
}

// beta adds C's prior contents (scaled) to the product; beta 0 ignores them, NaN included.
TEST_P(QuantFp8Gemm, BetaAddsThePriorContents) {
  std::mt19937 rng(22);
  const auto a = quant::quantize(test::random_tensor({9, 40}, rng, -2.0f, 2.0f), GetParam().a);
  const auto b = quant::quantize(test::random_tensor({6, 40}, rng, -0.1f, 0.1f), GetParam().b);
  const Tensor prior = test::random_tensor({9, 6}, rng, -1.0f, 1.0f);
  const std::vector<float> p = prior.to_float_vector(), product = naive(a, b, 0.5f);
  std::vector<float> expect(p.size());
  for (size_t i = 0; i < p.size(); ++i) expect[i] = product[i] + 0.75f * p[i];
  Tensor c = prior.clone();
  quant::gemm_lowp(a.codes, a.scale, b.codes, b.scale, c, {.alpha = 0.5f, .beta = 0.75f});
  EXPECT_LT(test::rel_error(c.to_float_vector(), expect), 1e-6);
  Tensor nan = Tensor::from_vector(std::vector<float>(54, std::numeric_limits<float>::quiet_NaN()), {9, 6});
  quant::gemm_lowp(a.codes, a.scale, b.codes, b.scale, nan, {.alpha = 0.5f});
  EXPECT_LT(test::rel_error(nan.to_float_vector(), product), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Pairs, QuantFp8Gemm,
                         ::testing::Values(Pair{LowpFormat::E4M3, LowpFormat::E4M3},
                                           Pair{LowpFormat::E5M2, LowpFormat::E4M3},
                                           Pair{LowpFormat::E4M3, LowpFormat::E5M2},
                                           Pair{LowpFormat::INT8, LowpFormat::INT8}),
                         [](const auto& info) {
                           return cat(quant::format_name(info.param.a), "_",
                                      quant::format_name(info.param.b));
                         });

TEST(QuantFp8GemmErrors, BadOperandsNameTheProblem) {
  const auto e4 = quant::quantize(Tensor::zeros({4, 8}, DType::F32), LowpFormat::E4M3);
  const auto e5 = quant::quantize(Tensor::zeros({4, 8}, DType::F32), LowpFormat::E5M2);
  const auto i8 = quant::quantize(Tensor::zeros({4, 8}, DType::F32), LowpFormat::INT8);
  const auto k6 = quant::quantize(Tensor::zeros({4, 6}, DType::F32), LowpFormat::E4M3);
  Tensor c = Tensor::empty({4, 4}, DType::F32);
  auto message = [&](const quant::QuantizedTensor& a, const quant::QuantizedTensor& b, Tensor& out) {
    try {
      quant::gemm_lowp(a.codes, a.scale, b.codes, b.scale, out);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_TRUE(test::contains(message(e5, e5, c), "unsupported format pair e5m2 x e5m2"));
  EXPECT_TRUE(test::contains(message(i8, e4, c), "unsupported format pair int8 x e4m3"));
  EXPECT_TRUE(test::contains(message(e4, k6, c), "must share K"));
  Tensor wrong = Tensor::empty({4, 5}, DType::F32);
  EXPECT_TRUE(test::contains(message(e4, e4, wrong), "must be [4, 4]"));
  Tensor bf = Tensor::empty({4, 4}, DType::BF16);
  EXPECT_TRUE(test::contains(message(e4, e4, bf), "must be F32 (or BF16 on CUDA)"));
}

}  // namespace
}  // namespace loft
