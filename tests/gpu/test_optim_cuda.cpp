// The CUDA AdamW step and sum of squares against the CPU reference (ops::cpu).
#include "engine/ops/ops.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

TEST(AdamWCuda, ThreeStepsMatchCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(41);
  const Device gpu = Device::cuda(0);
  for (float wd : {0.0f, 0.1f})
    for (int64_t n : {1, 7, 172, 100003}) {
      SCOPED_TRACE(cat("weight_decay=", wd, " n=", n));
      Tensor p = test::random_tensor({n}, rng);
      Tensor m = Tensor::zeros({n}, DType::F32), v = Tensor::zeros({n}, DType::F32);
      Tensor gp = p.to(gpu), gm = m.to(gpu), gv = v.to(gpu);
      ops::AdamWStep s;
      s.lr = 1e-2f;
      s.weight_decay = wd;
      for (int64_t step = 1; step <= 3; ++step) {
        s.step = step;
        const Tensor g = test::random_tensor({n}, rng, -1e-3f, 1e-3f);
        ops::cpu::adamw(p, g, m, v, s);
        ops::cuda::adamw(gp, g.to(gpu), gm, gv, s);
        EXPECT_LT(test::rel_error(gp, p), 1e-6) << "param, step " << step;
        EXPECT_LT(test::rel_error(gm, m), 1e-6) << "m, step " << step;
        EXPECT_LT(test::rel_error(gv, v), 1e-6) << "v, step " << step;
      }
    }
}

TEST(SumSquaresCuda, MatchesCpu) {
  LOFT_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  EXPECT_EQ(ops::cuda::sum_squares(Tensor::zeros({0}, DType::F32, gpu)), 0.0);
  EXPECT_EQ(
      ops::cuda::sum_squares(Tensor::from_vector(std::vector<float>{1, -2, 3}, {3}).to(gpu)),
      14.0);
  std::mt19937 rng(43);
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(172), (int64_t(1) << 22) + 3}) {
    const Tensor x = test::random_tensor({n}, rng, -3, 3);
    const double want = ops::cpu::sum_squares(x);
    EXPECT_NEAR(ops::cuda::sum_squares(x.to(gpu)), want, 1e-9 * want) << "n=" << n;
  }
}

}  // namespace
}  // namespace loft
