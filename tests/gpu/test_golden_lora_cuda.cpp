// CUDA backend (bf16 activations) against PyTorch/PEFT's fp32 golden values, within 2e-2.
#include "tests/common/golden.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

constexpr test::GoldenTolerance kCuda{2e-2, 2e-2, 2e-2, 2e-2, 2e-2};

TEST(GoldenLoraCuda, Stories260k) {
  LOFT_REQUIRE_GPU();
  test::check_golden_lora("stories260K-hf", "golden_stories260K.safetensors", Device::cuda(0),
                          kCuda);
}

TEST(GoldenLoraCuda, WideRandom) {
  LOFT_REQUIRE_GPU();
  test::check_golden_lora("wide-random", "golden_wide.safetensors", Device::cuda(0), kCuda);
}

}  // namespace
}  // namespace loft
