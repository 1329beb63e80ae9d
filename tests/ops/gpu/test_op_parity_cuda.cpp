// The parity harness on CUDA: every row of tests/ops/cases at every size, CUDA against the CPU
// reference in F32 and (where the op takes it) BF16, the CPU fed the BF16-rounded inputs the GPU
// saw; and every backward op against central finite differences of its forward op.
#include "tests/common/test_util.h"
#include "tests/ops/cases/op_cases.h"

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
        const Tensors want = c.run(in, Device::cpu(), DType::F32), got = c.run(in, kGpu, dt);
        ASSERT_EQ(got.size(), want.size()) << c.op;
        const double tol = dt == DType::F32 ? c.tol_f32 : c.tol_bf16;
        for (size_t o = 0; o < got.size(); ++o) {
          const double err = rel_error(got[o], want[o]);
          EXPECT_LE(err, tol) << c.op << " " << dtype_name(dt) << " size " << i << " output " << o;
        }
      }
}

TEST(OpParityCuda, BackwardOpsMatchFiniteDifferences) {
  LOFT_REQUIRE_GPU();
  EXPECT_GT(expect_backward_matches_differences(kGpu, 4000), 20);
}

}  // namespace
}  // namespace loft::test::parity
