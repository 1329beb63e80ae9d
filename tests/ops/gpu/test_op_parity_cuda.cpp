// The parity harness on CUDA: every row of engine/ops/cases at every size, CUDA against the CPU
// reference in F32 and (where the op takes it) BF16, the CPU fed the BF16-rounded inputs the GPU
// saw; every row's exact cases; and every backward op against central finite differences of its
// forward op.
#include "tests/ops/harness/parity_checks.h"

namespace loft::test::parity {
namespace {

const Device kGpu = Device::cuda(0);

TEST(OpParityCuda, EveryRowMatchesTheCpuAtEverySize) {
  LOFT_REQUIRE_GPU();
  for (const OpCase& c : op_cases())
    for (size_t i = 0; i < c.sizes.size(); ++i)
      for (DType dt : {DType::F32, DType::BF16}) {
        if (dt == DType::BF16 && !c.bf16) continue;
        std::mt19937 rng(3000 + uint32_t(i));
        Tensors in = c.make(c.sizes[i], rng);
        if (dt == DType::BF16) in = round_to_bf16(in);
        const Tensors want = run_once(c, in, Device::cpu(), DType::F32), got = run_once(c, in, kGpu, dt);
        ASSERT_EQ(got.size(), want.size()) << c.op;
        for (size_t o = 0; o < got.size(); ++o)
          EXPECT_LE(parity_error(c, o, got[o], want[o]), tolerance(c, dt, o))
              << label(c, c.sizes[i]) << " " << dtype_name(dt) << " output " << o;
      }
}

TEST(OpParityCuda, ExactCasesHold) {
  LOFT_REQUIRE_GPU();
  EXPECT_GE(expect_exact_cases(kGpu), 13);
}

TEST(OpParityCuda, BackwardOpsMatchFiniteDifferences) {
  LOFT_REQUIRE_GPU();
  EXPECT_GT(expect_backward_matches_differences(kGpu, 4000), 20);
}

}  // namespace
}  // namespace loft::test::parity
