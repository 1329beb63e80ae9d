// FALQON's truncated SVD (engine/peft/low_rank.h) against a dense reference: the singular values
// of small matrices from a full eigendecomposition of E·Eᵀ in double, the reconstruction error
// against the optimal rank-r error, odd and rank-deficient shapes, zero input, determinism.
#include <cmath>

#include "engine/ops/ops.h"
#include "engine/peft/low_rank.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

// Singular values of a host F32 [m×n], descending, from the dense eigenproblem of E·Eᵀ (or EᵀE).
std::vector<double> dense_singular_values(const Tensor& e) {
  const int64_t m = e.size(0), n = e.size(1), k = std::min(m, n);
  const bool rows = m <= n;
  std::vector<double> g(size_t(k * k), 0.0);
  const float* p = e.ptr<float>();
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = 0; b < k; ++b) {
      double s = 0;
      for (int64_t t = 0; t < (rows ? n : m); ++t)
        s += rows ? double(p[a * n + t]) * p[b * n + t] : double(p[t * n + a]) * p[t * n + b];
      g[size_t(a * k + b)] = s;
    }
  std::vector<double> lam, vec;
  symmetric_eigen(g, int(k), lam, vec);
  for (double& l : lam) l = std::sqrt(std::max(l, 0.0));
  return lam;
}

// ‖E − left·right‖_F.
double residual(const Tensor& e, const LowRankFactors& f) {
  Tensor approx = Tensor::empty(e.shape(), DType::F32);
  ops::gemm(f.left.to(Device::cpu()), f.right.to(Device::cpu()), approx);
  double s = 0;
  for (int64_t i = 0; i < e.numel(); ++i) {
    const double d = double(e.ptr<float>()[i]) - approx.ptr<float>()[i];
    s += d * d;
  }
  return std::sqrt(s);
}

// E = G1·diag(decay^i)·G2: a spectrum that falls off, like a weight's, but not exactly known.
Tensor decaying(int64_t m, int64_t n, double decay, std::mt19937& rng) {
  const int64_t k = std::min(m, n);
  Tensor g1 = test::random_tensor({m, k}, rng), g2 = test::random_tensor({k, n}, rng);
  for (int64_t j = 0; j < k; ++j)
    for (int64_t i = 0; i < m; ++i) g1.ptr<float>()[i * k + j] *= float(std::pow(decay, double(j)));
  Tensor e = Tensor::empty({m, n}, DType::F32);
  ops::gemm(g1, g2, e);
  return e;
}

TEST(SymmetricEigen, DecomposesARandomSymmetricMatrix) {
  std::mt19937 rng(1);
  for (int n : {1, 2, 9, 40}) {
    const Tensor r = test::random_tensor({n, n}, rng);
    std::vector<double> a(size_t(n * n));
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) a[size_t(i * n + j)] = r.ptr<float>()[i * n + j] + r.ptr<float>()[j * n + i];
    std::vector<double> lam, v;
    symmetric_eigen(a, n, lam, v);
    for (int i = 0; i + 1 < n; ++i) EXPECT_GE(lam[i], lam[i + 1]);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        double av = 0, vtv = 0;
        for (int t = 0; t < n; ++t) {
          av += a[size_t(i * n + t)] * v[size_t(t * n + j)];
          vtv += v[size_t(t * n + i)] * v[size_t(t * n + j)];
        }
        EXPECT_NEAR(av, lam[j] * v[size_t(i * n + j)], 1e-10) << n << ": A·v";
        EXPECT_NEAR(vtv, i == j ? 1.0 : 0.0, 1e-12) << n << ": VᵀV";
      }
  }
}

TEST(RandomizedSvd, MatchesDenseSingularValuesAndOptimalError) {
  std::mt19937 rng(2);
  struct Case {
    int64_t m, n;
    int r;
    double decay;
  };
  for (const Case c : {Case{172, 64, 8, 0.8}, Case{64, 172, 8, 0.8}, Case{96, 96, 16, 0.9},
                       Case{200, 120, 8, 1.0}}) {
    const Tensor e = decaying(c.m, c.n, c.decay, rng);
    const std::vector<double> ref = dense_singular_values(e);
    const LowRankFactors f = randomized_svd(e, c.r, {.seed = 7});
    ASSERT_EQ(f.sigma.size(), size_t(c.r));
    EXPECT_EQ(f.left.shape(), Shape({c.m, c.r}));
    EXPECT_EQ(f.right.shape(), Shape({c.r, c.n}));
    double tail = 0;
    for (size_t i = size_t(c.r); i < ref.size(); ++i) tail += ref[i] * ref[i];
    const double opt = std::sqrt(tail), got = residual(e, f);
    const std::string what = cat(c.m, "x", c.n, " r", c.r, " decay ", c.decay);
    // A decaying spectrum is found almost exactly; a flat one (decay 1) to within a few percent.
    for (int i = 0; i < c.r; ++i)
      EXPECT_NEAR(f.sigma[size_t(i)], ref[size_t(i)], (c.decay < 1 ? 2e-3 : 3e-2) * ref[0]) << what << " σ" << i;
    EXPECT_LE(got, (c.decay < 1 ? 1.01 : 1.03) * opt + 1e-6 * ref[0]) << what << ": residual " << got << " vs optimal " << opt;
    // √σ on each side: the factors are balanced.
    for (int i = 0; i < c.r; ++i) {
      double nl = 0, nr = 0;
      const Tensor l = f.left.to(Device::cpu()), rt = f.right.to(Device::cpu());
      for (int64_t t = 0; t < c.m; ++t) nl += std::pow(l.ptr<float>()[t * c.r + i], 2);
      for (int64_t t = 0; t < c.n; ++t) nr += std::pow(rt.ptr<float>()[i * c.n + t], 2);
      EXPECT_NEAR(std::sqrt(nl), std::sqrt(f.sigma[size_t(i)]), 1e-3 * std::sqrt(ref[0])) << what;
      EXPECT_NEAR(std::sqrt(nr), std::sqrt(f.sigma[size_t(i)]), 1e-3 * std::sqrt(ref[0])) << what;
    }
  }
}

TEST(RandomizedSvd, RankBeyondTheMatrixGivesZeroComponents) {
  std::mt19937 rng(3);
  const Tensor e = test::random_tensor({7, 33}, rng);
  const LowRankFactors f = randomized_svd(e, 8, {.seed = 1});
  const std::vector<double> ref = dense_singular_values(e);
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(f.sigma[size_t(i)], ref[size_t(i)], 1e-4 * ref[0]);
  EXPECT_EQ(f.sigma[7], 0.0);
  for (int64_t j = 0; j < 33; ++j) EXPECT_EQ(f.right.ptr<float>()[7 * 33 + j], 0.0f);
  for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(f.left.ptr<float>()[i * 8 + 7], 0.0f);
  EXPECT_LT(residual(e, f), 1e-4 * ref[0]) << "a rank-7 matrix is reproduced by 7 components";

  // Rank 3 in a 40×30 matrix, rank 6 asked: 3 components, the rest exactly zero.
  const Tensor u = test::random_tensor({40, 3}, rng), v = test::random_tensor({3, 30}, rng);
  Tensor low = Tensor::empty({40, 30}, DType::F32);
  ops::gemm(u, v, low);
  const LowRankFactors g = randomized_svd(low, 6, {.seed = 2});
  EXPECT_GT(g.sigma[2], 0.0);
  EXPECT_LT(g.sigma[3], 1e-3 * g.sigma[0]);
  EXPECT_LT(residual(low, g), 1e-5 * g.sigma[0]);
}

TEST(RandomizedSvd, ZeroMatrixAndDeterminism) {
  const Tensor z = Tensor::zeros({16, 24}, DType::F32);
  const LowRankFactors f = randomized_svd(z, 4);
  for (double s : f.sigma) EXPECT_EQ(s, 0.0);
  for (float x : f.left.to_float_vector()) EXPECT_EQ(x, 0.0f);
  for (float x : f.right.to_float_vector()) EXPECT_EQ(x, 0.0f);

  std::mt19937 rng(4);
  const Tensor e = test::random_tensor({50, 37}, rng);
  const LowRankFactors a = randomized_svd(e, 5, {.seed = 9}), b = randomized_svd(e, 5, {.seed = 9});
  EXPECT_EQ(a.left.to_float_vector(), b.left.to_float_vector());
  EXPECT_EQ(a.right.to_float_vector(), b.right.to_float_vector());
  EXPECT_THROW(randomized_svd(e, 0), Error);
  EXPECT_THROW(randomized_svd(Tensor::zeros({0, 4}, DType::F32), 2), Error);
}

}  // namespace
}  // namespace loft
