// eval::run_mmlu's two schedules give the same scores: each question's context cached and its
// four choices forked (the CPU's), and batches of questions forked from the subject's prefix (a
// GPU's); wide-random's abstract_algebra prompts fit its context, so the subject prefix is used.
#include "eval/mmlu.h"
#include "tests/common/decode_check.h"
#include "tests/common/test_util.h"
#include "tokenizer/tokenizer.h"

namespace loft {
namespace {

TEST(MmluRun, PerQuestionAndBatchedSchedulesAgree) {
  LOFT_REQUIRE_DATA("models/wide-random");
  auto model = test::decode_test_model("wide-random", Device::cpu(), DType::F32);
  const auto tok = load_tokenizer(test::data_path("models/wide-random"));
  eval::MmluOptions mo;
  mo.data = test::data_path("mmlu");
  mo.subjects = {"abstract_algebra"};
  mo.limit = 3;
  mo.slots = 8;
  mo.max_length = model->config().max_position_embeddings;
  std::vector<eval::MmluSample> a, b;
  mo.per_question_prefix = true;
  mo.on_sample = [&](const eval::MmluSample& s) { a.push_back(s); };
  const auto ra = eval::run_mmlu(*model, *tok, mo);
  mo.per_question_prefix = false;
  mo.on_sample = [&](const eval::MmluSample& s) { b.push_back(s); };
  const auto rb = eval::run_mmlu(*model, *tok, mo);
  EXPECT_GT(ra.shared_prefix_tokens, 500);  // the description and five shots
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].pred, b[i].pred);
    for (size_t c = 0; c < 4; ++c)
      EXPECT_NEAR(a[i].loglikelihoods[c], b[i].loglikelihoods[c], 1e-5 * std::abs(b[i].loglikelihoods[c]));
  }
  EXPECT_EQ(ra.overall.correct, rb.overall.correct);
}

}  // namespace
}  // namespace loft
