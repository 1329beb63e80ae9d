// The Llama-family cousins on the CUDA backend (issue 28): the tiny Qwen2 (tied, untied), Qwen3
// and Mistral (16-key window) models against transformers + PEFT's fp32 golden values, as
// FamilyGolden runs them on the CPU.
//  - f32 activations (TF32 off): logits, loss, every LoRA gradient and the parameters after AdamW
//    steps 1 and 3 within 1e-4 of PEFT's. This checks each family kernel on the GPU: the q/k/v
//    bias and its gradient, the per-head q/k RMSNorm, the windowed attention forward and backward.
//  - bf16 activations: logits and loss within 2e-2 and 1e-2 of the same model computed in f32 on
//    the CPU with its frozen weights rounded to bf16, which isolates what bf16 activations cost
//    (GoldenLoraCuda explains why the fp32 golden values are the wrong reference here). The
//    gradients' distances are printed, not held.
//  - greedy decoding through the KV cache in f32: transformers' tokens, token for token (the
//    second prompt is 41 tokens, so Mistral's window slides through the cache).
#include <cstdio>

#include "tests/common/decode_check.h"
#include "tests/common/golden.h"
#include "tests/common/test_util.h"
#include "tests/common/tiny_families.h"

namespace loft {
namespace {

constexpr test::GoldenTolerance kF32{1e-4, 1e-4, 1e-4, 1e-4, 1e-4};

class FamilyGoldenCuda : public ::testing::TestWithParam<std::string> {};

std::string golden_file(const std::string& name) { return "golden_" + name + ".safetensors"; }

TEST_P(FamilyGoldenCuda, F32MatchesPeft) {
  LOFT_REQUIRE_GPU();
  const std::string name = GetParam();
  LOFT_REQUIRE_DATA("models/" + name);
  LOFT_REQUIRE_DATA("golden/" + golden_file(name));
  test::check_golden_lora(name, golden_file(name), Device::cuda(0), DType::F32, kF32);
}

TEST_P(FamilyGoldenCuda, Bf16MatchesTheBf16StoredModel) {
  LOFT_REQUIRE_GPU();
  const std::string name = GetParam();
  LOFT_REQUIRE_DATA("models/" + name);
  LOFT_REQUIRE_DATA("golden/" + golden_file(name));
  const test::GoldenRun want = test::golden_from_loft(name, golden_file(name), Device::cpu(), DType::F32,
                                                      /*bf16_frozen_weights=*/true);
  const test::GoldenRun got = test::golden_from_loft(name, golden_file(name), Device::cuda(0), DType::BF16);
  const double logits = test::rel_error(got.logits, want.logits);
  EXPECT_LT(logits, 2e-2) << name;
  EXPECT_NEAR(got.loss, want.loss, 1e-2 * std::abs(want.loss)) << name;
  const double worst_grad = test::worst_grad_error(got, want);
  RecordProperty("logits_rel_error", cat(logits));
  RecordProperty("worst_grad_rel_error", cat(worst_grad));
  std::printf("%s bf16 on cuda:0: logits rel %.3g, loss %.6f vs %.6f, worst LoRA grad rel %.3g\n", name.c_str(),
              logits, got.loss, want.loss, worst_grad);
}

TEST_P(FamilyGoldenCuda, GreedyTokensMatchTransformers) {
  LOFT_REQUIRE_GPU();
  test::expect_greedy_matches_transformers(GetParam(), Device::cuda(0));
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyGoldenCuda, test::tiny_families(), test::family_test_name);

}  // namespace
}  // namespace loft
