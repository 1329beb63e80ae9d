// The CPU Hadamard transform: orthogonality, agreement with the dense Kronecker matrix, exact
// inverse (transpose for Paley orders), Parseval, in place = out of place, operand errors.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/quant/hadamard.h"
#include "tests/common/test_util.h"

namespace loft::test {
namespace {

using quant::HadamardPlan;

Tensor identity(int64_t n) {
  std::vector<float> v(size_t(n * n), 0.0f);
  for (int64_t i = 0; i < n; ++i) v[size_t(i * n + i)] = 1.0f;
  return Tensor::from_vector(v, {n, n});
}

Tensor transformed(const Tensor& x, bool inverse) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  quant::hadamard_transform(x, y, inverse);
  return y;
}

// x [rows, n] times the dense matrix m [n, n] (or its transpose), in double.
std::vector<float> matmul(const Tensor& x, const Tensor& m, bool transpose_m) {
  const int64_t n = m.size(0), rows = x.numel() / n;
  const float* xp = x.ptr<float>();
  const float* mp = m.ptr<float>();
  std::vector<float> out(size_t(rows * n));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < n; ++j)
        acc += double(xp[r * n + j]) * (transpose_m ? mp[c * n + j] : mp[j * n + c]);
      out[size_t(r * n + c)] = float(acc);
    }
  return out;
}

// Small widths covering every construction: powers of two, Paley I (12, 20, 44), Paley II (28·2,
// 36·2), Sylvester (40), block-diagonal (172 = 43 blocks of 4), and 288 = 36·8.
const int64_t kSmallWidths[] = {1, 2, 4, 8, 12, 20, 24, 40, 44, 56, 72, 172, 288};

TEST(HadamardTransform, DenseMatrixIsOrthogonal) {
  for (int64_t n : kSmallWidths) {
    const HadamardPlan plan = quant::plan_for(n);
    const Tensor h = quant::hadamard_dense(plan);
    const std::vector<float> hht = matmul(h, h, /*transpose_m=*/true);
    double worst = 0;
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < n; ++c)
        worst = std::max(worst, std::abs(double(hht[size_t(r * n + c)]) - (r == c ? 1.0 : 0.0)));
    EXPECT_LT(worst, 1e-5) << plan.describe();
  }
}

TEST(HadamardTransform, IdentityGivesTheDenseMatrixAndItsTranspose) {
  for (int64_t n : kSmallWidths) {
    const HadamardPlan plan = quant::plan_for(n);
    const Tensor h = quant::hadamard_dense(plan);
    const Tensor eye = identity(n);
    // Rows of I·H are the rows of H; rows of I·Hᵀ are the rows of Hᵀ.
    EXPECT_LT(rel_error(transformed(eye, false), h), 1e-6) << plan.describe();
    EXPECT_LT(rel_error(transformed(eye, true).to_float_vector(), matmul(eye, h, true)), 1e-6)
        << plan.describe();
    // And the transformed identity is itself orthogonal.
    const Tensor fwd = transformed(eye, false);
    const std::vector<float> ffT = matmul(fwd, fwd, true);
    EXPECT_LT(rel_error(ffT, eye.to_float_vector()), 1e-5) << plan.describe();
  }
}

TEST(HadamardTransform, RandomRowsMatchTheDenseMatrix) {
  std::mt19937 rng(7);
  for (int64_t n : kSmallWidths)
    for (int64_t rows : {1, 5}) {
      const HadamardPlan plan = quant::plan_for(n);
      const Tensor h = quant::hadamard_dense(plan);
      const Tensor x = random_tensor({rows, n}, rng);
      EXPECT_LT(rel_error(transformed(x, false).to_float_vector(), matmul(x, h, false)), 1e-5)
          << plan.describe();
      EXPECT_LT(rel_error(transformed(x, true).to_float_vector(), matmul(x, h, true)), 1e-5)
          << plan.describe();
    }
}

TEST(HadamardTransform, PaleyInverseIsTheTransposeNotTheForward) {
  std::mt19937 rng(8);
  const Tensor x = random_tensor({3, 12}, rng);
  EXPECT_GT(rel_error(transformed(x, true), transformed(x, false)), 0.1);
}

TEST(HadamardTransform, RoundTripAndParsevalAtLlamaWidths) {
  std::mt19937 rng(9);
  for (int64_t n : {64, 172, 288, 768, 4096, 5120, 5632, 11008, 13824, 14336}) {
    const HadamardPlan plan = quant::plan_for(n);
    const Tensor x = random_tensor({3, n}, rng, -2.0f, 2.0f);
    const Tensor y = transformed(x, false);
    const std::vector<float> xv = x.to_float_vector(), yv = y.to_float_vector();
    for (int64_t r = 0; r < 3; ++r) {
      double nx = 0, ny = 0;
      for (int64_t j = 0; j < n; ++j) {
        nx += double(xv[size_t(r * n + j)]) * xv[size_t(r * n + j)];
        ny += double(yv[size_t(r * n + j)]) * yv[size_t(r * n + j)];
      }
      EXPECT_NEAR(std::sqrt(ny / nx), 1.0, 1e-5) << plan.describe() << " row " << r;
    }
    EXPECT_GT(rel_error(y, x), 0.5) << plan.describe();  // it did rotate
    EXPECT_LT(rel_error(transformed(y, true), x), 1e-5) << plan.describe();
    EXPECT_LT(rel_error(transformed(transformed(x, true), false), x), 1e-5) << plan.describe();
  }
}

TEST(HadamardTransform, InPlaceEqualsOutOfPlaceOnAnyLeadingShape) {
  std::mt19937 rng(10);
  for (bool inverse : {false, true}) {
    const Tensor x = random_tensor({2, 3, 768}, rng);
    const Tensor out = transformed(x, inverse);
    Tensor inplace = x.clone();
    quant::hadamard_transform(inplace, inplace, inverse);
    EXPECT_EQ(inplace.to_float_vector(), out.to_float_vector());
    EXPECT_EQ(out.shape(), x.shape());
  }
}

TEST(HadamardTransform, EmptyRowsAreANoOp) {
  const Tensor x = Tensor::empty({0, 12}, DType::F32);
  EXPECT_NO_THROW(quant::hadamard_transform(x, x));
}

TEST(HadamardTransform, BadOperandsAreErrorsNamingThem) {
  std::mt19937 rng(11);
  const Tensor x = random_tensor({2, 12}, rng);
  auto expect_error = [](auto&& fn, const std::string& part) {
    try {
      fn();
      ADD_FAILURE() << "accepted; expected an error containing " << part;
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), part));
    }
  };
  expect_error([&] { quant::hadamard_transform(quant::plan_for(24), x, x); }, "plan's n=24");
  expect_error(
      [&] {
        quant::hadamard_transform(x, Tensor::empty({3, 12}, DType::F32));
      },
      "output y [3, 12]");
  expect_error(
      [&] {
        quant::hadamard_transform(x, Tensor::empty({2, 12}, DType::BF16));
      },
      "output y");
  const Tensor xb = Tensor::empty({2, 12}, DType::BF16);
  expect_error([&] { quant::hadamard_transform(xb, xb); }, "CPU transform takes F32");
  expect_error([&] { quant::hadamard_transform(quant::HadamardPlan{}, x, x); }, "plan is empty");
  const Tensor bad = random_tensor({2, 2310}, rng);
  expect_error([&] { quant::hadamard_transform(bad, bad); }, "n=2310");
}

}  // namespace
}  // namespace loft::test
