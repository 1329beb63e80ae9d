// Issue 5: each low-precision method ends within 5% of LoRA's validation loss after the same
// training, on both test models (CPU backend; tests/gpu runs the same on CUDA).
#include <gtest/gtest.h>

#include "tests/common/method_quality.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

TEST(MethodQuality, Stories260kCpu) { test::expect_methods_near_lora("stories260K-hf", Device::cpu(), 150); }
// 60 steps: wide-random is 24x stories260K's size and these runs sit in CI's time budget.
TEST(MethodQuality, WideRandomCpu) {
  LOFT_REQUIRE_DATA("models/wide-random");
  test::expect_methods_near_lora("wide-random", Device::cpu(), 60);
}

}  // namespace
}  // namespace loft
