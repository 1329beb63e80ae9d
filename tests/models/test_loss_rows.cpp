// The loss head on the rows with a target only (ModelBatch::loss_rows): make_batch lists them when
// at least 1/64 of the positions have none, and a step then gives the loss and every adapter
// gradient of the whole-batch head (to fp32 rounding: the CPU GEMM's blocking follows the row
// count), for every method; the evaluation's loss too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/ops/ops.h"
#include "engine/peft/method.h"
#include "models/llama/bench_model.h"
#include "models/llama/model.h"
#include "tests/common/tiny_llama.h"

namespace loft::llama {
namespace {

constexpr int64_t kRows = 3, kSeq = 40;

// Labels with each row's first `prompt` tokens masked, as a chat template masks the prompt.
ModelBatch masked_batch(int64_t prompt, int64_t vocab) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int32_t> id(0, int32_t(vocab - 1));
  std::vector<int32_t> ids(size_t(kRows * kSeq)), labels(ids.size());
  for (size_t t = 0; t < ids.size(); ++t) {
    ids[t] = id(rng);
    labels[t] = int64_t(t) % kSeq < prompt ? ops::kIgnoreIndex : ids[t];
  }
  return make_batch(ids, labels, {}, kRows, kSeq, Device::cpu());
}

ModelBatch whole(ModelBatch b) {
  b.loss_rows = b.loss_targets = b.loss_scatter = Tensor();
  return b;
}

TEST(LossRows, MakeBatchListsTheRowsWithATarget) {
  const ModelBatch b = masked_batch(10, 64);
  ASSERT_TRUE(b.loss_rows.defined());
  const std::vector<int64_t> targets = b.targets.to_int_vector(), rows = b.loss_rows.to_int_vector(),
                             row_targets = b.loss_targets.to_int_vector(), scatter = b.loss_scatter.to_int_vector();
  ASSERT_EQ(int64_t(rows.size()), b.target_count);
  EXPECT_EQ(b.target_count, kRows * (kSeq - 10));  // positions 9..38 of each row predict 10..39
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(row_targets[i], targets[size_t(rows[i])]);
    EXPECT_EQ(scatter[size_t(rows[i])], int64_t(i));
  }
  for (size_t t = 0; t < targets.size(); ++t)
    if (targets[t] == ops::kIgnoreIndex) {
      EXPECT_EQ(scatter[t], int64_t(rows.size())) << t;
    }
  // One position without a target in 128 (a row's last) stays under 1/64: the whole batch.
  std::vector<int32_t> ids(128, 1);
  EXPECT_FALSE(make_batch(ids, ids, {}, 1, 128, Device::cpu()).loss_rows.defined());
  // No target at all: nothing to gather.
  std::vector<int32_t> none(128, ops::kIgnoreIndex);
  EXPECT_FALSE(make_batch(ids, none, {}, 1, 128, Device::cpu()).loss_rows.defined());
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, float rel, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  float scale = 0, diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(b[i]));
    diff = std::max(diff, std::fabs(a[i] - b[i]));
  }
  EXPECT_LE(diff, rel * scale + 1e-12f) << what;
}

TEST(LossRows, StepAndEvaluationEqualTheWholeBatchHead) {
  const LlamaConfig c = test::tiny_llama_config();
  const ModelBatch compact = masked_batch(25, c.vocab_size), all = whole(compact);
  ASSERT_TRUE(compact.loss_rows.defined());
  for (const std::string& method : method_names()) {
    SCOPED_TRACE(method);
    std::vector<double> losses;
    std::vector<std::vector<std::vector<float>>> grads;
    std::vector<double> evals;
    for (const ModelBatch* b : {&compact, &all}) {
      MethodOptions m{method, {8, 16.0f}, parse_lora_targets("all"), 0};
      apply_method_invariants(m);
      std::mt19937_64 rng(1);
      LlamaModel model(c, random_llama_weights(c, DType::F32, Device::cpu(), 3), make_linear_factory(m, rng));
      test::randomize_adapters(model);
      losses.push_back(model.forward_backward(*b, 1.0f).loss_sum);
      grads.emplace_back();
      for (Param* p : model.params()) grads.back().push_back(p->grad.to_float_vector());
      evals.push_back(model.evaluate(*b).loss_sum);
    }
    EXPECT_NEAR(losses[0], losses[1], 1e-5 * std::fabs(losses[1]));
    EXPECT_NEAR(evals[0], evals[1], 1e-5 * std::fabs(evals[1]));
    ASSERT_EQ(grads[0].size(), grads[1].size());
    ASSERT_FALSE(grads[1].empty());
    // HALO rounds each dY to 8 bits with a per-tensor scale: an fp32 rounding change in the head's
    // gradient moves some of those codes one step (2e-3 of the largest gradient seen here).
    const float rel = method == "halo" ? 1e-2f : 1e-5f;
    for (size_t i = 0; i < grads[1].size(); ++i) expect_close(grads[0][i], grads[1][i], rel, cat("param ", i));
  }
}

}  // namespace
}  // namespace loft::llama
