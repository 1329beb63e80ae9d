// The Llama-family cousins against transformers 5.17 + PEFT in fp32 (eager attention), on the CPU:
// tiny random Qwen2 (tied and untied embeddings), Qwen3 and Mistral (a 16-key window in rows of
// 64) made by scripts/dev/make_family_references.py (tests/data/README.md). Per model: logits,
// loss, every LoRA gradient, the parameters after AdamW steps 1 and 3 and the three losses within
// 1e-4 of PEFT's (as GoldenLora for Llama), the PEFT adapter PEFT saved giving its logits, and the
// base model's greedy tokens through the KV cache, token for token.
#include <gtest/gtest.h>

#include <cstdio>

#include "engine/io/safetensors_reader.h"
#include "engine/peft/method.h"
#include "engine/peft/peft_adapter.h"
#include "models/llama/loading.h"
#include "tests/common/decode_check.h"
#include "tests/common/golden.h"
#include "tests/common/test_util.h"
#include "tests/common/tiny_families.h"

namespace loft {
namespace {

constexpr test::GoldenTolerance kCpu{1e-4, 1e-4, 1e-4, 1e-4, 1e-4};

class FamilyGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyGolden, LoraMatchesPeft) {
  const std::string name = GetParam(), golden = "golden_" + name + ".safetensors";
  LOFT_REQUIRE_DATA("models/" + name);
  LOFT_REQUIRE_DATA("golden/" + golden);
  const test::GoldenRun got = test::golden_from_loft(name, golden, Device::cpu(), DType::F32);
  const test::GoldenRun want = test::golden_from_file(golden);
  test::expect_golden_match(got, want, kCpu, name);
  // The measured distances, for the record (tests/data/README.md quotes them).
  const double worst_grad = test::worst_grad_error(got, want);
  double worst_loss = 0;
  for (size_t i = 0; i < want.losses.size() && i < got.losses.size(); ++i)
    worst_loss = std::max(worst_loss, std::abs(double(got.losses[i]) - want.losses[i]) / std::abs(want.losses[i]));
  const std::vector<float> a = got.logits.to_float_vector(), b = want.logits.to_float_vector();
  double max_abs = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) max_abs = std::max(max_abs, std::abs(double(a[i]) - b[i]));
  RecordProperty("logits_rel_error", cat(test::rel_error(got.logits, want.logits)));
  RecordProperty("logits_max_abs", cat(max_abs));
  RecordProperty("loss_abs", cat(std::abs(got.loss - want.loss)));
  RecordProperty("worst_grad_rel_error", cat(worst_grad));
  RecordProperty("worst_step_loss_rel", cat(worst_loss));
  std::printf("%s: logits rel %.3g (max abs %.3g), loss abs %.3g, worst grad rel %.3g, 3-step losses rel %.3g\n",
              name.c_str(), test::rel_error(got.logits, want.logits), max_abs, std::abs(got.loss - want.loss),
              worst_grad, worst_loss);
}

// The adapter as PEFT saved it loads onto the family's model and gives PEFT's logits.
TEST_P(FamilyGolden, PeftAdapterGivesPeftLogits) {
  const std::string name = GetParam();
  LOFT_REQUIRE_DATA("models/" + name);
  LOFT_REQUIRE_DATA("golden/adapter_" + name);
  LOFT_REQUIRE_DATA("golden/golden_" + name + ".safetensors");
  const auto dir = test::data_path("golden/adapter_" + name);
  const PeftAdapter a = load_peft_adapter(dir);
  std::mt19937_64 rng(0);
  auto model = llama::load_model(test::data_path("models/" + name), Device::cpu(),
                                 make_linear_factory(llama::method_options_for(a), rng));
  llama::apply_adapter(*model, a, dir);
  const auto g = SafetensorsReader::open(test::data_path("golden/golden_" + name + ".safetensors"));
  const Tensor ids = g.tensor("input_ids");
  std::vector<int32_t> id32;
  for (int64_t v : ids.to_int_vector()) id32.push_back(int32_t(v));
  const ModelBatch b = make_batch(id32, id32, {}, ids.size(0), ids.size(1), Device::cpu());
  EXPECT_LT(test::rel_error(model->logits(b), g.tensor("logits")), 1e-4);
}

// transformers' generate(do_sample=False, eos_token_id=None): 24 tokens after each prompt (the
// second prompt is 41 tokens, so Mistral's window slides through the cache).
TEST_P(FamilyGolden, GreedyTokensMatchTransformers) { test::expect_greedy_matches_transformers(GetParam(), Device::cpu()); }

INSTANTIATE_TEST_SUITE_P(Families, FamilyGolden, test::tiny_families(), test::family_test_name);

}  // namespace
}  // namespace loft
