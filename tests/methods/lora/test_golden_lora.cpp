// CPU backend (f32) against PyTorch/PEFT: logits, loss, every LoRA gradient, the parameters after
// AdamW steps 1 and 3 and the three losses, all within 1e-4 (relative to each tensor's norm).
#include "tests/common/golden.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

constexpr test::GoldenTolerance kCpu{1e-4, 1e-4, 1e-4, 1e-4, 1e-4};

TEST(GoldenLora, Stories260kCpu) {
  test::check_golden_lora("stories260K-hf", "golden_stories260K.safetensors", Device::cpu(),
                          DType::F32, kCpu);
}

TEST(GoldenLora, WideRandomCpu) {
  LOFT_REQUIRE_DATA("models/wide-random");
  LOFT_REQUIRE_DATA("golden/golden_wide.safetensors");
  test::check_golden_lora("wide-random", "golden_wide.safetensors", Device::cpu(), DType::F32,
                          kCpu);
}

// Why the bf16 GPU check of stories260K uses bf16-rounded weights as its reference: storing this
// fp32 checkpoint's frozen weights in bf16 moves the gradients by a few percent on its own, with
// every operation still in fp32 (measured 5.1%). Pinned here so a change in that fact is seen.
TEST(GoldenLora, Stories260kBf16WeightStorageAloneMovesGradients) {
  const char* file = "golden_stories260K.safetensors";
  const auto rounded = test::golden_from_loft("stories260K-hf", file, Device::cpu(), DType::F32,
                                              /*bf16_frozen_weights=*/true);
  const auto golden = test::golden_from_file(file);
  double worst = 0;
  for (const auto& [k, v] : golden.grad) worst = std::max(worst, test::rel_error(rounded.grad.at(k), v));
  RecordProperty("worst_grad_rel_error", std::to_string(worst));
  EXPECT_GT(worst, 0.02);
  EXPECT_LT(worst, 0.10);
}

}  // namespace
}  // namespace loft
