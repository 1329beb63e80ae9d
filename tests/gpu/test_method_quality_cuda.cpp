// Issue 5: each low-precision method ends within 5% of LoRA's validation loss after the same
// training, on both test models, on the GPU (bf16 activations).
#include <gtest/gtest.h>

#include "tests/common/method_quality.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

TEST(MethodQualityCuda, Stories260k) {
  LOFT_REQUIRE_GPU();
  test::expect_methods_near_lora("stories260K-hf", Device::cuda(0), 150);
}
TEST(MethodQualityCuda, WideRandom) {
  LOFT_REQUIRE_GPU();
  test::expect_methods_near_lora("wide-random", Device::cuda(0), 150);
}

}  // namespace
}  // namespace loft
