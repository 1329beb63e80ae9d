// train_step's data-parallel form (RankStep): each rank runs its share of a step's micro-batches
// with the whole step's loss scale, the gradients are summed over the ranks, and every rank takes
// the same update. Two CPU replicas in two threads (RankWorkers), summed by ThreadGradSum (a
// stand-in for NCCL's all-reduce, which gives every rank the same bytes): after each step both replicas
// are bit-identical, and they match one model that took all the micro-batches itself within
// fp32 summation order.
#include <gtest/gtest.h>

#include <random>

#include "engine/optim/adamw.h"
#include "engine/peft/method.h"
#include "engine/train/rank_workers.h"
#include "engine/train/train_step.h"
#include "models/llama/bench_model.h"
#include "models/llama/model.h"
#include "tests/common/thread_grad_sum.h"
#include "tests/common/tiny_llama.h"
#include "tests/common/every_method.h"

namespace loft::llama {
namespace {

struct Replica {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<AdamW> optimizer;
};

Replica replica(const std::string& method) {
  const LlamaConfig c = test::tiny_llama_config();
  MethodOptions m{method, {8, 16.0f}, parse_lora_targets("all"), 0};
  apply_method_invariants(m);
  std::mt19937_64 rng(1);
  Replica r;
  r.model = std::make_unique<LlamaModel>(c, random_llama_weights(c, DType::F32, Device::cpu(), 3),
                                         make_linear_factory(m, rng));
  r.optimizer = std::make_unique<AdamW>(r.model->params(), AdamWConfig{.weight_decay = 0.01});
  return r;
}

std::vector<ModelBatch> step_batches(int step) {
  const LlamaConfig c = test::tiny_llama_config();
  std::mt19937_64 tok(100 + step);
  std::uniform_int_distribution<int32_t> id(0, int32_t(c.vocab_size - 1));
  std::vector<ModelBatch> out;
  for (int k = 0; k < 4; ++k) {  // 4 micro-batches of 2 rows, different lengths of targets
    std::vector<int32_t> ids(2 * 17), targets;
    for (int32_t& t : ids) t = id(tok);
    targets = ids;
    for (int i = 0; i < k; ++i) targets[size_t(i)] = -100;  // uneven target counts
    out.push_back(make_batch(ids, targets, {}, 2, 17, Device::cpu()));
  }
  return out;
}

std::vector<std::vector<float>> values(LlamaModel& m) {
  std::vector<std::vector<float>> v;
  for (Param* p : m.params()) v.push_back(p->value.to_float_vector());
  return v;
}

TEST(RankStep, TwoRanksStayIdenticalAndMatchOneModel) {
  for (const std::string& method : test::one_method_per_update_kind()) {
    SCOPED_TRACE(method);
    Replica one = replica(method), r0 = replica(method), r1 = replica(method);
    for (int step = 1; step <= 3; ++step) {
      const std::vector<ModelBatch> micro = step_batches(step);
      int64_t targets = 0;
      for (const ModelBatch& b : micro) targets += b.target_count;
      const StepResult whole =
          train_step(*one.model, *one.optimizer, micro, 1.0, 1e-3, step);
      // Rank r takes micro-batches r, r + 2 (rank_share's strided split).
      // The two replicas share the CPU and with it its scratches (FALQON's transposed codes),
      // which ranks on separate GPUs each have their own of: they compute one at a time.
      test::ThreadGradSum sum(2);
      RankWorkers workers({Device::cpu(), Device::cpu()}, /*serial=*/true);
      GradientSync* sync[2] = {workers.serialized(&sum.rank(0)), workers.serialized(&sum.rank(1))};
      StepResult part[2];
      workers.run([&](size_t r) {
        Replica& rep = r == 0 ? r0 : r1;
        const std::vector<ModelBatch> mine{micro[r], micro[r + 2]};
        const RankStep rank{sync[r], targets};
        part[r] = train_step(*rep.model, *rep.optimizer, mine, 1.0, 1e-3, step, &rank);
      });
      EXPECT_EQ(part[0].targets, whole.targets);
      EXPECT_EQ(part[0].loss_sum, part[1].loss_sum) << "the loss is summed over the ranks";
      EXPECT_EQ(part[0].grad_norm, part[1].grad_norm);
      const auto v0 = values(*r0.model), v1 = values(*r1.model), vw = values(*one.model);
      for (size_t p = 0; p < v0.size(); ++p)
        EXPECT_EQ(v0[p], v1[p]) << "param " << p << " step " << step;
      // FALQON folds its top-k rows of B into the backbone after each step: a near tie between
      // rows may break the other way under another fp32 summation order (another CPU's BLAS
      // kernel), so its weights are compared rank with rank only, and with the one model only
      // through step 1's loss and gradient norm, which come before the first fold.
      const bool falqon = std::string(method) == "falqon";
      if (falqon && step > 1) continue;
      EXPECT_NEAR(part[0].loss_sum, whole.loss_sum, 1e-6 * whole.loss_sum);
      EXPECT_NEAR(part[0].grad_norm, whole.grad_norm, 1e-5 * whole.grad_norm);
      if (falqon) continue;
      ASSERT_EQ(v0.size(), vw.size());
      for (size_t p = 0; p < v0.size(); ++p) {
        for (size_t k = 0; k < v0[p].size(); ++k)
          ASSERT_NEAR(v0[p][k], vw[p][k], 1e-5f + 1e-4f * std::abs(vw[p][k]))
              << "param " << p << " element " << k << " step " << step;
      }
    }
  }
}

TEST(RankStep, RefusesAStepWithoutItsTargetCount) {
  Replica r = replica("lora");
  test::ThreadGradSum sum(1);
  const std::vector<ModelBatch> micro = step_batches(1);
  const RankStep bad{&sum.rank(0), 1};  // fewer than this rank's own targets
  EXPECT_THROW(train_step(*r.model, *r.optimizer, micro, 1.0, 1e-3, 1, &bad), Error);
}

}  // namespace
}  // namespace loft::llama
