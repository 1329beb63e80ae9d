// Hadamard matrices (every constructible order: ±1 entries, H·Hᵀ = K·I exactly) and width plans
// (the decomposition of every Llama width, block-diagonal fallbacks, errors naming n).
#include <gtest/gtest.h>

#include "engine/quant/hadamard.h"
#include "tests/common/test_util.h"

namespace loft::test {
namespace {

using quant::HadamardMatrix;
using quant::HadamardPlan;

void expect_hadamard(const HadamardMatrix& h) {
  ASSERT_EQ(h.entries.size(), size_t(h.k) * size_t(h.k)) << h.construction;
  for (int8_t v : h.entries) ASSERT_TRUE(v == 1 || v == -1) << "order " << h.k;
  for (int r = 0; r < h.k; ++r)
    for (int c = 0; c < h.k; ++c) {
      int dot = 0;
      for (int j = 0; j < h.k; ++j) dot += h.at(r, j) * h.at(c, j);
      ASSERT_EQ(dot, r == c ? h.k : 0)
          << "order " << h.k << " (" << h.construction << ") rows " << r << ", " << c;
    }
}

TEST(HadamardMatrix, EveryOrderTheLlamaWidthsUseIsHadamard) {
  for (int k : {1, 2, 4, 8, 12, 20, 28, 36, 40, 44, 60, 108, 140}) {
    ASSERT_TRUE(quant::hadamard_order_supported(k)) << k;
    expect_hadamard(quant::hadamard_matrix(k));
  }
}

TEST(HadamardMatrix, EverySupportedOrderIsHadamard) {
  int count = 0;
  for (int k = 1; k <= quant::kMaxHadamardOrder; ++k)
    if (quant::hadamard_order_supported(k)) {
      expect_hadamard(quant::hadamard_matrix(k));
      ++count;
    }
  EXPECT_GE(count, 50);  // 1, 2 and most multiples of 4 up to 256
}

TEST(HadamardMatrix, ConstructionsAreTheDocumentedOnes) {
  EXPECT_EQ(quant::hadamard_matrix(12).construction, "Paley I (q=11)");
  EXPECT_EQ(quant::hadamard_matrix(108).construction, "Paley I (q=107)");
  EXPECT_EQ(quant::hadamard_matrix(28).construction, "Paley II (q=13)");
  EXPECT_EQ(quant::hadamard_matrix(36).construction, "Paley II (q=17)");
  EXPECT_EQ(quant::hadamard_matrix(40).construction, "Sylvester 2 x [Paley I (q=19)]");
  // Paley matrices are not symmetric: the inverse transform must use the transpose.
  const HadamardMatrix& h = quant::hadamard_matrix(12);
  bool symmetric = true;
  for (int r = 0; r < 12; ++r)
    for (int c = 0; c < 12; ++c) symmetric = symmetric && h.at(r, c) == h.at(c, r);
  EXPECT_FALSE(symmetric);
}

TEST(HadamardMatrix, CachedMatrixIsTheSameObject) {
  EXPECT_EQ(&quant::hadamard_matrix(44), &quant::hadamard_matrix(44));
}

TEST(HadamardMatrix, UnsupportedOrderIsAnErrorNamingIt) {
  for (int k : {0, 3, 6, 172, 1000}) {
    EXPECT_FALSE(quant::hadamard_order_supported(k)) << k;
    try {
      quant::hadamard_matrix(k);
      ADD_FAILURE() << "order " << k << " was accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), cat("order ", k, " ")));
    }
  }
}

struct ExpectedPlan {
  int64_t n, block, pow2;
  int k;
};

TEST(HadamardPlan, LlamaWidthsDecomposeAsDocumented) {
  const ExpectedPlan cases[] = {
      {64, 64, 64, 1},          {288, 288, 8, 36},       {768, 768, 64, 12},
      {4096, 4096, 4096, 1},    {5120, 5120, 256, 20},   {5632, 5632, 128, 44},
      {13824, 13824, 128, 108}, {14336, 14336, 512, 28}, {11008, 256, 256, 1},
      {172, 4, 4, 1},           {12, 12, 1, 12},         {1, 1, 1, 1},
  };
  for (const ExpectedPlan& c : cases) {
    const HadamardPlan p = quant::plan_for(c.n);
    EXPECT_EQ(p.n, c.n);
    EXPECT_EQ(p.block, c.block) << p.describe();
    EXPECT_EQ(p.pow2, c.pow2) << p.describe();
    EXPECT_EQ(int64_t(1) << p.log2_pow2, p.pow2) << p.describe();
    EXPECT_EQ(p.k, c.k) << p.describe();
    ASSERT_NE(p.matrix, nullptr);
    EXPECT_EQ(p.matrix->k, c.k);
    EXPECT_EQ(p.block_diagonal(), c.block != c.n) << p.describe();
    EXPECT_FLOAT_EQ(p.scale(), float(1.0 / std::sqrt(double(c.block))));
  }
}

TEST(HadamardPlan, EveryPowerOfTwoIsOneFwht) {
  for (int m = 0; m <= 20; ++m) {
    const HadamardPlan p = quant::plan_for(int64_t(1) << m);
    EXPECT_EQ(p.k, 1);
    EXPECT_EQ(p.log2_pow2, m);
    EXPECT_FALSE(p.block_diagonal());
  }
}

TEST(HadamardPlan, DescribesItself) {
  const std::string full = quant::plan_for(768).describe();
  EXPECT_TRUE(contains(full, "n=768"));
  EXPECT_TRUE(contains(full, "Paley I (q=11)"));
  EXPECT_TRUE(contains(full, "FWHT 64"));
  const std::string diag = quant::plan_for(11008).describe();
  EXPECT_TRUE(contains(diag, "n=11008"));
  EXPECT_TRUE(contains(diag, "block-diagonal, 43 blocks of 256"));
  EXPECT_TRUE(contains(quant::plan_for(172).describe(), "block-diagonal, 43 blocks of 4"));
  EXPECT_EQ(quant::plan_for(11008).blocks(), 43);
}

TEST(HadamardPlan, WidthWithoutAnOrthogonalPlanIsAnErrorNamingIt) {
  for (int64_t n : {int64_t(2 * 3 * 5 * 7 * 11), int64_t(6), int64_t(3), int64_t(0), int64_t(-8)}) {
    try {
      const HadamardPlan p = quant::plan_for(n);
      ADD_FAILURE() << "n=" << n << " got a plan: " << p.describe();
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), cat("n=", n, " ")));
    }
  }
}

}  // namespace
}  // namespace loft::test
