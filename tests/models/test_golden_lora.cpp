// CPU backend (f32) against PyTorch/PEFT: logits, loss, every LoRA gradient, the parameters after
// AdamW steps 1 and 3 and the three losses, all within 1e-4 (relative to each tensor's norm).
#include "tests/common/golden.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

constexpr test::GoldenTolerance kCpu{1e-4, 1e-4, 1e-4, 1e-4, 1e-4};

TEST(GoldenLora, Stories260kCpu) {
  test::check_golden_lora("stories260K-hf", "golden_stories260K.safetensors", Device::cpu(), DType::F32, kCpu);
}

TEST(GoldenLora, WideRandomCpu) {
  test::check_golden_lora("wide-random", "golden_wide.safetensors", Device::cpu(), DType::F32, kCpu);
}

}  // namespace
}  // namespace loft
