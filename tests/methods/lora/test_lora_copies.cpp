// LoRA's compute-dtype copies of A and B (Param::copy): the optimizer writes them with its update,
// so after_step() does not convert again; values set any other way are still refreshed by
// after_step(). A BF16 weight on the CPU gives BF16 copies without any GEMM being run.
#include <cstring>

#include "engine/optim/adamw.h"
#include "engine/peft/lora_linear.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

// The copy holds exactly convert(value).
::testing::AssertionResult copy_is_value(const Param& p) {
  if (!p.copy.defined()) return ::testing::AssertionFailure() << p.name << " has no copy";
  Tensor want = Tensor::empty(p.value.shape(), p.copy.dtype());
  ops::convert(p.value, want);
  const std::vector<float> a = p.copy.to_float_vector(), b = want.to_float_vector();
  if (std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) != 0)
    return ::testing::AssertionFailure() << p.name << "'s copy differs from its value rounded";
  return ::testing::AssertionSuccess();
}

std::unique_ptr<LoraLinear> bf16_lora(std::mt19937_64& rng) {
  std::mt19937 r(3);
  Tensor w = Tensor::empty({24, 16}, DType::BF16);
  ops::convert(test::random_tensor({24, 16}, r), w);
  return std::make_unique<LoraLinear>("proj", w, LoraOptions{4, 8.0f}, rng);
}

void random_grads(LoraLinear& l, std::mt19937& r) {
  for (Param* p : l.params()) p->grad.copy_from(test::random_tensor(p->value.shape(), r, -1, 1));
}

TEST(LoraCopies, TheOptimizerWritesThemAndAfterStepLeavesThem) {
  std::mt19937_64 rng(1);
  auto l = bf16_lora(rng);
  ASSERT_EQ(l->lora_a().copy.dtype(), DType::BF16);
  ASSERT_EQ(l->lora_b().copy.dtype(), DType::BF16);
  AdamW opt(l->params(), {});
  std::mt19937 r(5);
  for (int step = 0; step < 3; ++step) {
    random_grads(*l, r);
    opt.step(1e-2);
    for (Param* p : l->params()) {
      EXPECT_TRUE(p->copy_written);
      EXPECT_TRUE(copy_is_value(*p)) << "after the optimizer, step " << step;
    }
    l->after_step();
    for (Param* p : l->params()) {
      EXPECT_FALSE(p->copy_written) << "after_step clears the mark";
      EXPECT_TRUE(copy_is_value(*p));
    }
  }
}

// A value written by hand (no optimizer step marked the copy): after_step converts it.
TEST(LoraCopies, AfterStepRefreshesValuesSetOtherwise) {
  std::mt19937_64 rng(2);
  auto l = bf16_lora(rng);
  std::mt19937 r(7);
  Param& b = l->lora_b();
  b.value.copy_from(test::random_tensor(b.value.shape(), r));
  EXPECT_FALSE(copy_is_value(b)) << "the test means to change B";
  l->after_step();
  EXPECT_TRUE(copy_is_value(b));
  EXPECT_TRUE(copy_is_value(l->lora_a()));
}

// On F32 the forward reads the masters themselves: no copy for the optimizer to write.
TEST(LoraCopies, F32WeightsHaveNoCopy) {
  std::mt19937_64 rng(3);
  std::mt19937 r(3);
  LoraLinear l("proj", test::random_tensor({24, 16}, r), LoraOptions{4, 8.0f}, rng);
  EXPECT_FALSE(l.lora_a().copy.defined());
  EXPECT_FALSE(l.lora_b().copy.defined());
  AdamW opt(l.params(), {});
  random_grads(l, r);
  opt.step(1e-2);
  EXPECT_FALSE(l.lora_a().copy_written);
}

}  // namespace
}  // namespace loft
