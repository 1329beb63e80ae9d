// CPU GEMM against a naive double-precision product, all transposes, awkward shapes, alpha/beta.
#include <cmath>

#include "engine/ops/ops.h"
#include "tests/engine/test_ops_cpu_util.h"

namespace loft {
namespace {

// C = alpha·op(A)·op(B) + beta·C0 in double; A stored [K, M] when trans_a, B stored [N, K] when
// trans_b. beta == 0 means C0 is not read.
std::vector<double> gemm_ref(const Tensor& a, const Tensor& b, const Tensor& c0, int64_t m,
                             int64_t n, int64_t k, const ops::GemmOptions& o) {
  const auto av = test::to_double(a), bv = test::to_double(b), cv = test::to_double(c0);
  std::vector<double> out(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = o.trans_a ? av[size_t(p * m + i)] : av[size_t(i * k + p)];
        const double y = o.trans_b ? bv[size_t(j * k + p)] : bv[size_t(p * n + j)];
        s += x * y;
      }
      double v = double(o.alpha) * s;
      if (o.beta != 0.0f) v += double(o.beta) * cv[size_t(i * n + j)];
      out[size_t(i * n + j)] = v;
    }
  return out;
}

struct Mnk {
  int64_t m, n, k;
};

TEST(OpsCpuGemm, MatchesNaiveReferenceForAllTransposesShapesAlphaBeta) {
  std::mt19937 rng(11);
  const Mnk shapes[] = {{1, 1, 1},   {7, 7, 7},    {64, 64, 64}, {172, 172, 172},
                        {173, 65, 33}, {1, 172, 7}, {7, 1, 64},   {33, 173, 1},
                        // across the row blocks (kGemmRowBlock): A's rows are M, or K when trans_a
                        {2 * ops::kGemmRowBlock + 5, 3, 2}, {3, 2, 2 * ops::kGemmRowBlock + 5}};
  const std::pair<float, float> alpha_beta[] = {{1.0f, 0.0f}, {0.5f, 0.0f}, {-1.3f, 0.7f}, {1.0f, 1.0f}};
  for (const Mnk& s : shapes)
    for (int tr = 0; tr < 4; ++tr)
      for (auto [alpha, beta] : alpha_beta) {
        ops::GemmOptions o{.trans_a = (tr & 1) != 0, .trans_b = (tr & 2) != 0, .alpha = alpha,
                           .beta = beta};
        Tensor a = test::random_tensor(o.trans_a ? Shape{s.k, s.m} : Shape{s.m, s.k}, rng);
        Tensor b = test::random_tensor(o.trans_b ? Shape{s.n, s.k} : Shape{s.k, s.n}, rng);
        Tensor c = test::random_tensor({s.m, s.n}, rng);
        const auto ref = gemm_ref(a, b, c, s.m, s.n, s.k, o);
        ops::gemm(a, b, c, o);
        EXPECT_LT(test::rel_error_ref(c, ref), 1e-5)
            << "m=" << s.m << " n=" << s.n << " k=" << s.k << " trans_a=" << o.trans_a
            << " trans_b=" << o.trans_b << " alpha=" << alpha << " beta=" << beta;
      }
}

// What LlamaModel's token tiles rely on: a product over rows [0, T) equals the same product over
// tiles of those rows at multiples of kGemmRowBlock, bit for bit, both for row outputs (x·Wᵀ) and
// for a reduction over the rows accumulated tile after tile (a weight gradient dyᵀ·x).
TEST(OpsCpuGemm, TilesOfRowsEqualTheWholeBitForBit) {
  std::mt19937 rng(13);
  const int64_t T = 2 * ops::kGemmRowBlock + 37, tile = ops::kGemmRowBlock, in = 24, out = 40;
  Tensor x = test::random_tensor({T, in}, rng), w = test::random_tensor({out, in}, rng);
  Tensor dy = test::random_tensor({T, out}, rng);
  Tensor y = Tensor::zeros({T, out}, DType::F32, Device::cpu());
  Tensor y_tiled = y.clone();
  Tensor dw = test::random_tensor({out, in}, rng);
  Tensor dw_tiled = dw.clone();
  ops::gemm(x, w, y, {.trans_b = true});
  ops::gemm(dy, x, dw, {.trans_a = true, .alpha = 0.5f, .beta = 1.0f});
  for (int64_t t0 = 0; t0 < T; t0 += tile) {
    const int64_t n = std::min(tile, T - t0);
    Tensor yc = y_tiled.slice(t0, n);
    ops::gemm(x.slice(t0, n), w, yc, {.trans_b = true});
    ops::gemm(dy.slice(t0, n), x.slice(t0, n), dw_tiled, {.trans_a = true, .alpha = 0.5f, .beta = 1.0f});
  }
  EXPECT_EQ(y_tiled.to_float_vector(), y.to_float_vector());
  EXPECT_EQ(dw_tiled.to_float_vector(), dw.to_float_vector());
}

TEST(OpsCpuGemm, BetaZeroIgnoresNanInC) {
  std::mt19937 rng(12);
  Tensor a = test::random_tensor({5, 9}, rng), b = test::random_tensor({3, 9}, rng);
  Tensor c = Tensor::from_vector(std::vector<float>(15, NAN), {5, 3});
  ops::GemmOptions o{.trans_b = true};
  const auto ref = gemm_ref(a, b, c, 5, 3, 9, o);
  ops::gemm(a, b, c, o);  // Y = X·Wᵀ, the linear-layer form
  EXPECT_LT(test::rel_error_ref(c, ref), 1e-6);  // +inf if any NaN leaked
}

TEST(OpsCpuGemm, EmptyInnerDimensionGivesBetaC) {
  Tensor a = Tensor::zeros({2, 0}, DType::F32), b = Tensor::zeros({0, 3}, DType::F32);
  Tensor c = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  ops::gemm(a, b, c, {.beta = 0.5f});
  EXPECT_EQ(c.to_float_vector(), (std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3}));
  Tensor nan_c = Tensor::from_vector(std::vector<float>(6, NAN), {2, 3});
  ops::gemm(a, b, nan_c);
  EXPECT_EQ(nan_c.to_float_vector(), std::vector<float>(6, 0.0f));
}

TEST(OpsCpuGemm, ExactSmallProduct) {
  // [[1,2],[3,4]] · [[5,6],[7,8]] = [[19,22],[43,50]]; with alpha 2, beta -1 on C = 1s.
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector(std::vector<float>{5, 6, 7, 8}, {2, 2});
  Tensor c = Tensor::from_vector(std::vector<float>{1, 1, 1, 1}, {2, 2});
  ops::gemm(a, b, c, {.alpha = 2.0f, .beta = -1.0f});
  EXPECT_EQ(c.to_float_vector(), (std::vector<float>{37, 43, 85, 99}));
}

}  // namespace
}  // namespace loft
