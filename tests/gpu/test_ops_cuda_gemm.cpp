// cuBLASLt GEMM against the CPU reference: all transpose combinations, alpha/beta, odd shapes,
// F32 (no TF32), BF16→BF16 and BF16→F32, unaligned views, and beta = 0 over a NaN-filled C.
#include <cmath>
#include <limits>

#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

struct Dims {
  int64_t m, n, k;
};
const Dims kDims[] = {{1, 1, 1},      {7, 3, 5},       {1, 172, 7}, {173, 65, 33},
                      {64, 128, 256}, {172, 172, 172}, {3, 1, 300}};

Shape a_shape(const Dims& d, bool ta) { return ta ? Shape{d.k, d.m} : Shape{d.m, d.k}; }
Shape b_shape(const Dims& d, bool tb) { return tb ? Shape{d.n, d.k} : Shape{d.k, d.n}; }

// Runs one GEMM on the GPU and on the CPU (on the same input values); returns rel_error of C.
double gemm_error(const Tensor& a, const Tensor& b, Tensor& c, const ops::GemmOptions& opt) {
  Tensor ca = cpu_f32(a), cb = cpu_f32(b), cc = cpu_f32(c);
  ops::gemm(ca, cb, cc, opt);
  ops::gemm(a, b, c, opt);
  return rel_error(c, cc);
}

void check_all(DType ab, DType out, double tolerance) {
  std::mt19937 rng(11);
  for (const Dims& d : kDims)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (auto [alpha, beta] :
             {std::pair{1.0f, 0.0f}, std::pair{0.5f, 1.0f}, std::pair{-2.0f, 0.25f}}) {
          Tensor a = to_gpu(random_tensor(a_shape(d, ta), rng), ab);
          Tensor b = to_gpu(random_tensor(b_shape(d, tb), rng), ab);
          Tensor c = to_gpu(random_tensor({d.m, d.n}, rng), out);
          EXPECT_LT(gemm_error(a, b, c, {ta, tb, alpha, beta}), tolerance)
              << name(ab) << "->" << name(out) << " M=" << d.m << " N=" << d.n << " K=" << d.k
              << " ta=" << ta << " tb=" << tb << " alpha=" << alpha << " beta=" << beta;
        }
}

TEST(GemmCuda, F32MatchesCpu) {
  LOFT_REQUIRE_GPU();
  check_all(DType::F32, DType::F32, 1e-5);
}

TEST(GemmCuda, Bf16ToBf16MatchesCpu) {
  LOFT_REQUIRE_GPU();
  check_all(DType::BF16, DType::BF16, 1e-2);
}

TEST(GemmCuda, Bf16ToF32MatchesCpu) {
  LOFT_REQUIRE_GPU();
  check_all(DType::BF16, DType::F32, 1e-4);  // exact bf16 products, fp32 sums
}

TEST(GemmCuda, RepeatedShapeReusesPlanWithNewData) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(12);
  for (int rep = 0; rep < 3; ++rep) {
    Tensor a = to_gpu(random_tensor({37, 172}, rng), DType::BF16);
    Tensor b = to_gpu(random_tensor({88, 172}, rng), DType::BF16);
    Tensor c = Tensor::zeros({37, 88}, DType::BF16, kGpu);
    EXPECT_LT(gemm_error(a, b, c, {false, true}), 1e-2) << "repetition " << rep;
  }
}

TEST(GemmCuda, BetaZeroIgnoresNanInC) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(13);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (DType ab : kActivationDtypes) {
    const DType out = ab;
    Tensor a = to_gpu(random_tensor({9, 17}, rng), ab);
    Tensor b = to_gpu(random_tensor({17, 5}, rng), ab);
    Tensor c = to_gpu(Tensor::from_vector(std::vector<float>(45, nan), {9, 5}), out);
    Tensor ca = cpu_f32(a), cb = cpu_f32(b), cc = Tensor::zeros({9, 5}, DType::F32);
    ops::gemm(ca, cb, cc, {});
    ops::gemm(a, b, c, {});
    EXPECT_LT(rel_error(c, cc), tol(out)) << name(ab);  // +inf if any NaN leaked
  }
}

// Row slices start at addresses cuBLASLt's default 256-byte assumption does not hold for.
TEST(GemmCuda, UnalignedViews) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(14);
  for (DType ab : kActivationDtypes)
    for (DType out : {DType::F32, ab}) {
      Tensor a_big = to_gpu(random_tensor({8, 33}, rng), ab);
      Tensor b_big = to_gpu(random_tensor({34, 7}, rng), ab);
      Tensor c_big = to_gpu(random_tensor({8, 7}, rng), out);
      Tensor a = a_big.slice(1, 7), b = b_big.slice(1, 33), c = c_big.slice(1, 7);
      EXPECT_LT(gemm_error(a, b, c, {false, false, 1.0f, 0.5f}), tol(out))
          << name(ab) << "->" << name(out);
    }
}

TEST(GemmCuda, EmptyInnerDimensionScalesC) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(15);
  Tensor c0 = random_tensor({4, 6}, rng);
  Tensor a = Tensor::empty({4, 0}, DType::F32, kGpu), b = Tensor::empty({0, 6}, DType::F32, kGpu);
  Tensor c = c0.to(kGpu);
  ops::gemm(a, b, c, {false, false, 1.0f, 0.5f});
  std::vector<float> want = c0.to_float_vector();
  for (float& v : want) v *= 0.5f;
  EXPECT_LT(rel_error(c.to_float_vector(), want), 1e-7);
  ops::gemm(a, b, c, {});
  for (float v : c.to_float_vector()) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace loft::test
