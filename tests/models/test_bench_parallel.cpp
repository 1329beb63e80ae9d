// time_parallel_training_steps (engine/train/bench_parallel.h), the timing loop of `loft bench
// --gpus`, on two CPU replicas of bench's tiny shape with ThreadGradSum standing in for NCCL; the
// replicas share the CPU, so they compute one at a time (RankWorkers' serial mode). Every rank
// takes the same batch, so a step counts both ranks' tokens, the replicas stay bit-identical, and
// the summed gradient over twice the targets is one device's: the loss and the params match the
// one-device bench (time_training_steps) on the same batch; for every method and its spec's
// variant examples (hot:lqs runs its calibration pass on every rank).
#include <algorithm>
#include <gtest/gtest.h>

#include <random>

#include "engine/train/bench_parallel.h"
#include "models/llama/model.h"
#include "tests/common/every_method.h"
#include "tests/common/method_model.h"
#include "tests/common/thread_grad_sum.h"

namespace loft::llama {
namespace {

// A fresh bench model of the tiny shape (the same weights, adapter init and batch every time),
// its optimizer and a batch of 2 rows of 24 random tokens.
struct Replica {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<AdamW> optimizer;
  ModelBatch batch;

  explicit Replica(const std::string& method)
      : model(test::method_model("tiny", method, DType::F32, Device::cpu())) {
    optimizer = std::make_unique<AdamW>(model->params(), AdamWConfig{.weight_decay = 0.01});
    batch = test::random_token_batch(model->config().vocab_size, 2, 24);
  }
};

std::vector<std::vector<float>> values(LlamaModel& m) {
  std::vector<std::vector<float>> v;
  for (Param* p : m.params()) v.push_back(p->value.to_float_vector());
  return v;
}

const BenchSchedule kSchedule{.warmup = 1, .steps = 3, .profiled = 0, .lr = 1e-3, .max_grad_norm = 1.0};

TEST(BenchParallel, TwoCpuReplicasCountBothAndMatchOneDevice) {
  for (const std::string& method : test::every_method_and_variant_example()) {
    SCOPED_TRACE(method);
    Replica one(method);
    const BenchTimes want =
        time_training_steps(*one.model, *one.optimizer, one.batch, Device::cpu(), kSchedule);

    std::vector<std::unique_ptr<Replica>> reps;
    test::ThreadGradSum sum(2);
    std::vector<BenchRank> ranks;
    for (int r = 0; r < 2; ++r) {
      reps.push_back(std::make_unique<Replica>(method));
      ranks.push_back({reps.back()->model.get(), reps.back()->optimizer.get(), &reps.back()->batch,
                       &sum.rank(r), Device::cpu()});
    }
    const BenchTimes got = time_parallel_training_steps(ranks, kSchedule, /*serial=*/true);

    EXPECT_EQ(want.tokens_per_step, 2 * 24);
    EXPECT_EQ(got.tokens_per_step, 2 * want.tokens_per_step);
    ASSERT_EQ(got.step_seconds.size(), 3u);
    for (double s : got.step_seconds) EXPECT_GT(s, 0);
    EXPECT_EQ(got.median_s, median(got.step_seconds));
    EXPECT_DOUBLE_EQ(got.tokens_per_s, double(got.tokens_per_step) / got.median_s);
    EXPECT_GT(got.peak_bytes, 0);
    // Each rank's parts: the three on its stream make up its step, which its host step holds
    // (on the CPU the stream is the host clock, so the queued forward and backward are its compute).
    ASSERT_EQ(got.ranks.size(), 2u);
    for (const RankTimes& r : got.ranks) {
      EXPECT_GT(r.compute_s, 0);
      EXPECT_GT(r.exposed_sync_s, 0);
      EXPECT_GT(r.after_sync_s, 0);
      EXPECT_NEAR(r.compute_s + r.exposed_sync_s + r.after_sync_s, r.gpu_step_s, 1e-9);
      EXPECT_GE(r.host_step_s, r.gpu_step_s);
      EXPECT_NEAR(r.host_until_sum_s, r.compute_s, 1e-3);
      EXPECT_LT(r.gpu_step_s, *std::max_element(got.step_seconds.begin(), got.step_seconds.end()) * 1.0001);
    }
    EXPECT_TRUE(want.ranks.empty());
    // Twice the targets, each rank's gradient scaled by half: the sum is one device's gradient.
    EXPECT_NEAR(got.last_loss, want.last_loss, 1e-6 * want.last_loss);
    EXPECT_GT(got.last_loss, 1.0);
    const auto v0 = values(*reps[0]->model), v1 = values(*reps[1]->model);
    EXPECT_EQ(v0, v1);  // the ranks stay bit-identical
    const auto v = values(*one.model);
    ASSERT_EQ(v.size(), v0.size());
    for (size_t p = 0; p < v.size(); ++p)
      for (size_t k = 0; k < v[p].size(); ++k)
        ASSERT_NEAR(v0[p][k], v[p][k], 1e-6f + 1e-5f * std::abs(v[p][k])) << "param " << p;
  }
}

TEST(BenchParallel, RefusesProfiledStepsAndIncompleteRanks) {
  Replica a("lora");
  test::ThreadGradSum sum(1);
  BenchSchedule profiled = kSchedule;
  profiled.profiled = 1;
  const BenchRank rank{a.model.get(), a.optimizer.get(), &a.batch, &sum.rank(0), Device::cpu()};
  EXPECT_THROW(time_parallel_training_steps(std::span(&rank, 1), profiled), Error);
  BenchRank no_sync = rank;
  no_sync.sync = nullptr;
  EXPECT_THROW(time_parallel_training_steps(std::span(&no_sync, 1), kSchedule), Error);
  EXPECT_THROW(time_parallel_training_steps({}, kSchedule), Error);
}

}  // namespace
}  // namespace loft::llama
