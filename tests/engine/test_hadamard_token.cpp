// The token-dimension Hadamard (HALO level 2): plans for any token count (odd ones padded with
// zero rows, never truncated), agreement with Hᵀ·X from the dense matrix, exact inverse round
// trips through the padding, norm preservation, and operand errors.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/quant/hadamard.h"
#include "tests/common/test_util.h"

namespace loft::test {
namespace {

const int64_t kTokenCounts[] = {1, 2, 3, 7, 33, 64, 130, 172, 256, 300, 509, 2048, 3000};

TEST(HadamardToken, PlansCoverEveryCountWithBoundedPadding) {
  for (int64_t t : kTokenCounts) {
    const quant::HadamardPlan p = quant::token_plan(t);
    EXPECT_GE(p.n, t) << t;
    EXPECT_LT(p.n - t, 64) << t;
    EXPECT_EQ(p.n % p.block, 0) << p.describe();
    EXPECT_LE(p.block, quant::kMaxTokenBlock) << p.describe();
    EXPECT_GE(p.block, std::min<int64_t>(p.n, quant::kMinTokenBlock)) << p.describe();
    EXPECT_EQ(p.block, int64_t(p.k) * p.pow2) << p.describe();
  }
  EXPECT_EQ(quant::token_plan(2048).n, 2048);  // no padding where a split exists
  EXPECT_EQ(quant::token_plan(130).n, 132);    // Paley I, q = 131
  EXPECT_EQ(quant::token_plan(7).n, 8);
  EXPECT_THROW(quant::token_plan(0), Error);
}

// y [rows_y, N] = first rows of Hᵀ·[x; 0] (forward) or H·[x; 0] (inverse), in double.
std::vector<float> dense_reference(const quant::HadamardPlan& p, const Tensor& x, int64_t rows_y,
                                   bool inverse) {
  const Tensor h = quant::hadamard_dense(p);
  const int64_t n = p.n, cols = x.size(1);
  const float* hp = h.ptr<float>();
  const float* xp = x.ptr<float>();
  std::vector<float> y(size_t(rows_y * cols));
  for (int64_t i = 0; i < rows_y; ++i)
    for (int64_t c = 0; c < cols; ++c) {
      double acc = 0;
      for (int64_t r = 0; r < x.size(0); ++r)
        acc += double(inverse ? hp[i * n + r] : hp[r * n + i]) * xp[r * cols + c];
      y[size_t(i * cols + c)] = float(acc);
    }
  return y;
}

TEST(HadamardToken, MatchesTheDenseMatrixAndRoundTrips) {
  std::mt19937 rng(3);
  for (int64_t t : {1, 7, 33, 130, 172, 256, 300}) {
    for (int64_t cols : {1, 5, 40}) {
      const quant::HadamardPlan p = quant::token_plan(t);
      const Tensor x = random_tensor({t, cols}, rng);
      Tensor y = Tensor::empty({p.n, cols}, DType::F32);
      quant::token_transform(p, x, y);
      EXPECT_LT(rel_error(y.to_float_vector(), dense_reference(p, x, p.n, false)), 1e-5)
          << p.describe();
      // Parseval: the padded rows carry part of the norm; nothing is lost.
      double nx = 0, ny = 0;
      for (float v : x.to_float_vector()) nx += double(v) * v;
      for (float v : y.to_float_vector()) ny += double(v) * v;
      EXPECT_NEAR(ny, nx, 1e-5 * nx) << p.describe();
      // Back, dropping the padding: x again.
      Tensor back = Tensor::empty({t, cols}, DType::F32);
      quant::token_transform(p, y, back, /*inverse=*/true);
      EXPECT_LT(rel_error(back, x), 1e-5) << p.describe();
      EXPECT_LT(rel_error(back.to_float_vector(), dense_reference(p, y, t, true)), 1e-5);
    }
  }
}

TEST(HadamardToken, IsOrthogonalOnThePaddedSpace) {
  for (int64_t t : {7, 130, 300}) {
    const quant::HadamardPlan p = quant::token_plan(t);
    // Columns of the identity: the transform of I is Hᵀ, and Hᵀ·H = I.
    std::vector<float> eye(size_t(p.n * p.n), 0.0f);
    for (int64_t i = 0; i < p.n; ++i) eye[size_t(i * p.n + i)] = 1.0f;
    const Tensor id = Tensor::from_vector(eye, {p.n, p.n});
    Tensor ht = Tensor::empty({p.n, p.n}, DType::F32), back = ht.clone();
    quant::token_transform(p, id, ht);
    quant::token_transform(p, ht, back, /*inverse=*/true);
    EXPECT_LT(rel_error(back, id), 1e-5) << p.describe();
    double worst = 0;  // columns of Hᵀ orthonormal
    const float* h = ht.ptr<float>();
    for (int64_t a = 0; a < p.n; a += 7)
      for (int64_t b = 0; b < p.n; ++b) {
        double dot = 0;
        for (int64_t r = 0; r < p.n; ++r) dot += double(h[r * p.n + a]) * h[r * p.n + b];
        worst = std::max(worst, std::abs(dot - (a == b ? 1.0 : 0.0)));
      }
    EXPECT_LT(worst, 1e-5) << p.describe();
  }
}

TEST(HadamardToken, RefusesBadOperands) {
  const quant::HadamardPlan p = quant::token_plan(7);
  const Tensor x = Tensor::zeros({7, 3}, DType::F32);
  Tensor wide = Tensor::empty({9, 3}, DType::F32), cols = Tensor::empty({8, 4}, DType::F32);
  EXPECT_THROW(quant::token_transform(p, x, wide), Error);  // more rows than the plan
  EXPECT_THROW(quant::token_transform(p, x, cols), Error);  // N differs
  Tensor same = x;
  EXPECT_THROW(quant::token_transform(p, x, same), Error);  // in place
  try {
    quant::token_transform(p, x, wide);
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "n=8"));
  }
}

}  // namespace
}  // namespace loft::test
