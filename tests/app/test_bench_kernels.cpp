// `loft bench kernels` on the CPU: it times every op of the op table (each row's layer sizes,
// engine/ops/cases) besides its own kernels, in the kernel / us/call / GB/s / TFLOP/s table.
#include "engine/ops/cases/op_cases.h"
#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

TEST(BenchKernels, TimesEveryOpOfTheTable) {
  const test::CliResult r = test::run_cli_captured(
      {"bench", "kernels", "--shape", "tiny", "--device", "cpu", "--batch", "1", "--seq", "16"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "us/call"));
  EXPECT_TRUE(test::contains(r.out, "TFLOP/s"));
  for (const cases::OpCase& c : cases::op_cases()) {
    if (!c.not_timed.empty()) continue;
    EXPECT_TRUE(test::contains(r.out, "\n" + c.op + " ")) << c.op << " is not timed";
  }
  EXPECT_TRUE(test::contains(r.out, "\nquantize e4m3 ")) << "the kernels outside the table";
  EXPECT_TRUE(test::contains(r.out, "\nadamw step "));
}

// --only keeps the named kernels' rows and nothing else.
TEST(BenchKernels, OnlyTimesTheNamedKernels) {
  const test::CliResult r = test::run_cli_captured({"bench", "kernels", "--shape", "tiny", "--device", "cpu", "--batch",
                                                    "1", "--seq", "16", "--only", "attention,quantize"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "\nattention b=")) << r.out;
  EXPECT_TRUE(test::contains(r.out, "\nquantize e4m3 ")) << r.out;
  EXPECT_FALSE(test::contains(r.out, "\nattention_backward ")) << r.out;
  EXPECT_FALSE(test::contains(r.out, "\ngemm ")) << r.out;
  EXPECT_FALSE(test::contains(r.out, "\nadamw step ")) << r.out;
}

}  // namespace
}  // namespace loft
