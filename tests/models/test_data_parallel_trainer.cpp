// The data-parallel Trainer (DataParallelRanks, docs/multi-gpu.md) on CPU replicas, with
// ThreadGradSum standing in for NCCL: N ranks take the same rows per step as one device and
// stay bit-identical (the trainer's own replica check runs every step); a checkpoint written
// with one rank count resumes with another; a rank that fails stops the others with its own
// error; two "processes" (two Trainers, each holding one rank) agree and only rank 0 writes.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <thread>

#include "engine/peft/method.h"
#include "engine/train/trainer.h"
#include "models/llama/bench_model.h"
#include "models/llama/model.h"
#include "tests/common/test_util.h"
#include "tests/common/thread_grad_sum.h"
#include "tests/common/tiny_llama.h"
#include "tests/common/token_stream.h"
#include "tests/common/every_method.h"

namespace loft::llama {
namespace {

// `family` "": the tiny Llama; else that tiny cousin (qwen2, qwen3, mistral) with its biases and
// q/k norms drawn.
std::unique_ptr<LlamaModel> replica(const std::string& method, const std::string& family = "") {
  const LlamaConfig c = family.empty() ? test::tiny_llama_config() : test::tiny_family_config(family);
  MethodOptions m{method, {8, 16.0f}, parse_lora_targets("all"), 0};
  apply_method_invariants(m);
  std::mt19937_64 rng(1);
  return std::make_unique<LlamaModel>(
      c, family.empty() ? random_llama_weights(c, DType::F32, Device::cpu(), 3) : test::tiny_family_weights(c),
      make_linear_factory(m, rng));
}

using Stream = test::TokenStream;

TrainerConfig config(int64_t steps, const std::filesystem::path& dir = {}) {
  TrainerConfig c;
  c.steps = steps;
  c.grad_accum = 4;
  c.schedule = {ScheduleKind::Constant, 1e-3, 0, steps};
  c.max_grad_norm = 1.0;
  c.adamw.weight_decay = 0.01;
  c.run_dir = dir;
  c.quiet = true;
  c.check_replicas_every = 1;
  return c;
}

// N CPU replicas of one process, computing one at a time (they share the CPU's scratches).
struct Ranks {
  std::vector<std::unique_ptr<LlamaModel>> models;
  test::ThreadGradSum sum;
  Ranks(const std::string& method, int n, const std::string& family = "") : sum(n) {
    for (int r = 0; r < n; ++r) models.push_back(replica(method, family));
  }
  DataParallelRanks plan() {
    DataParallelRanks p{int(models.size()), {}, /*serial=*/true};
    for (size_t r = 0; r < models.size(); ++r)
      p.local.push_back({models[r].get(), &sum.rank(int(r)), int(r)});
    return p;
  }
};

std::vector<std::vector<float>> values(LlamaModel& m) {
  std::vector<std::vector<float>> v;
  for (Param* p : m.params()) v.push_back(p->value.to_float_vector());
  return v;
}

void expect_close(LlamaModel& a, LlamaModel& b, float tol) {
  const auto va = values(a), vb = values(b);
  ASSERT_EQ(va.size(), vb.size());
  for (size_t p = 0; p < va.size(); ++p)
    for (size_t k = 0; k < va[p].size(); ++k)
      ASSERT_NEAR(va[p][k], vb[p][k], tol + 100 * tol * std::abs(vb[p][k])) << "param " << p;
}

std::vector<double> run_losses(Trainer& t) {
  std::vector<double> losses;
  t.run([&](const StepMetrics& m) { losses.push_back(m.loss); });
  return losses;
}

TEST(DataParallelTrainer, RanksMatchOneDeviceAndStayIdentical) {
  for (const std::string& method : test::one_method_per_update_kind()) {
    SCOPED_TRACE(method);
    auto one = replica(method);
    Stream d1;
    Trainer single(*one, d1, config(1));
    const std::vector<double> want = run_losses(single);
    for (int n : {2, 4}) {
      SCOPED_TRACE(n);
      Ranks ranks(method, n);
      Stream dn;
      Trainer dp(ranks.plan(), dn, config(1));
      const std::vector<double> got = run_losses(dp);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_NEAR(got[0], want[0], 1e-6 * want[0]);
      for (int r = 1; r < n; ++r) EXPECT_EQ(values(*ranks.models[0]), values(*ranks.models[size_t(r)]));
      expect_close(*ranks.models[0], *one, 1e-5f);
    }
  }
  // Several steps: the replica check inside the trainer runs after every one (FALQON's top-k
  // rows may break a near tie differently than one device's summation order, so only the ranks
  // are compared with each other over several steps).
  for (const std::string& method : method_names()) {
    SCOPED_TRACE(method);
    Ranks ranks(method, 2);
    Stream d;
    Trainer dp(ranks.plan(), d, config(4));
    EXPECT_EQ(run_losses(dp).size(), 4u);
    EXPECT_EQ(values(*ranks.models[0]), values(*ranks.models[1]));
  }
}

// The Llama-family cousins split over ranks as a Llama does (issue 28): Qwen2's frozen biases,
// Qwen3's q/k norms and Mistral's window (8 keys, rows longer than that) change nothing about how
// the ranks share a step.
TEST(DataParallelTrainer, FamiliesMatchOneDevice) {
  for (const char* family : {"qwen2", "qwen3", "mistral"})
    for (const std::string& method : test::one_method_per_update_kind()) {
      SCOPED_TRACE(std::string(family) + " " + method);
      auto one = replica(method, family);
      Stream d1;
      Trainer single(*one, d1, config(1));
      const std::vector<double> want = run_losses(single);
      Ranks ranks(method, 2, family);
      Stream d2;
      Trainer dp(ranks.plan(), d2, config(1));
      const std::vector<double> got = run_losses(dp);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_NEAR(got[0], want[0], 1e-6 * want[0]);
      EXPECT_EQ(values(*ranks.models[0]), values(*ranks.models[1]));
      expect_close(*ranks.models[0], *one, 1e-5f);
    }
}

TEST(DataParallelTrainer, ALastShortStepIsSharedUnevenly) {
  auto one = replica("lora");
  Stream d1(Device::cpu(), 6);  // a step of 4 micro-batches, then one of 2
  Trainer single(*one, d1, config(5));
  const std::vector<double> want = run_losses(single);
  Ranks ranks("lora", 4);
  Stream d4(Device::cpu(), 6);
  Trainer dp(ranks.plan(), d4, config(5));
  const std::vector<double> got = run_losses(dp);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_NEAR(got[1], want[1], 1e-6 * want[1]);
  expect_close(*ranks.models[3], *one, 1e-5f);
}

TEST(DataParallelTrainer, RefusesAStepTheRanksCannotShare) {
  Ranks ranks("lora", 3);
  Stream d;
  EXPECT_THROW(Trainer(ranks.plan(), d, config(1)), Error);  // 4 micro-batches over 3 ranks
}

TEST(DataParallelTrainer, ACheckpointResumesOnAnotherRankCount) {
  test::TempDir dir;
  // Two ranks write a checkpoint at step 2 and go on to step 4.
  Ranks two("lora", 2);
  Stream d2;
  TrainerConfig c2 = config(4, dir / "two");
  c2.save_every = 2;
  Trainer t2(two.plan(), d2, c2);
  t2.run();
  ASSERT_TRUE(std::filesystem::exists(dir / "two" / "checkpoints" / "step-2" / "adapter.safetensors"));
  // One device resumes it to step 4: the same model within fp32 summation order.
  auto one = replica("lora");
  Stream d1;
  Trainer t1(*one, d1, config(4, dir / "one"));
  ASSERT_EQ(t1.resume(dir / "two" / "checkpoints" / "step-2"), 2);
  t1.run();
  expect_close(*one, *two.models[0], 1e-5f);
  // And four ranks resume it too.
  Ranks four("lora", 4);
  Stream d4;
  Trainer t4(four.plan(), d4, config(4, dir / "four"));
  ASSERT_EQ(t4.resume(dir / "two" / "checkpoints" / "step-2"), 2);
  t4.run();
  expect_close(*four.models[0], *two.models[0], 1e-5f);
  EXPECT_EQ(values(*four.models[0]), values(*four.models[3]));
}

TEST(DataParallelTrainer, DivergedReplicasAreCaughtBeforeACheckpoint) {
  test::TempDir dir;
  Ranks ranks("lora", 2);
  Stream d;
  TrainerConfig c = config(2, dir / "run");
  c.check_replicas_every = 0;  // only before the checkpoint
  c.save_every = 1;
  Trainer t(ranks.plan(), d, c);
  ranks.models[1]->params().front()->value.ptr<float>()[0] += 1e-3f;
  try {
    t.run();
    FAIL() << "diverged replicas were saved";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("replicas differ"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "run" / "checkpoints" / "step-1"));
}

// Throws from its forward on one rank, as an out-of-memory or a bad kernel would.
class FailingModel : public TrainableModel {
 public:
  FailingModel(LlamaModel& inner, bool fail) : inner_(inner), fail_(fail) {}
  LossSums forward_backward(const ModelBatch& b, float s) override {
    if (fail_) throw Error("rank 1: out of memory (test)");
    return inner_.forward_backward(b, s);
  }
  LossSums evaluate(const ModelBatch& b) override { return inner_.evaluate(b); }
  std::vector<Param*> params() override { return inner_.params(); }
  void after_step() override { inner_.after_step(); }
  void refresh_copies() override { inner_.refresh_copies(); }

 private:
  LlamaModel& inner_;
  bool fail_;
};

TEST(DataParallelTrainer, AFailingRankStopsTheOthersWithItsOwnError) {
  Ranks ranks("lora", 3);
  FailingModel m0(*ranks.models[0], false), m1(*ranks.models[1], true), m2(*ranks.models[2], false);
  DataParallelRanks plan = ranks.plan();
  plan.local[0].model = &m0;
  plan.local[1].model = &m1;
  plan.local[2].model = &m2;
  Stream d;
  TrainerConfig c = config(2);
  c.grad_accum = 3;
  Trainer t(plan, d, c);
  try {
    t.run();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rank 1: out of memory (test)");
  }
}

// Two Trainers in two threads, each holding one rank of a world of two, as two processes of a
// torchrun-style run do: each reads the whole stream, they agree, and only rank 0 writes.
TEST(DataParallelTrainer, OneRankPerProcessAgreesAndOnlyRankZeroWrites) {
  test::TempDir dir;
  test::ThreadGradSum sum(2);
  std::unique_ptr<LlamaModel> models[2] = {replica("lora"), replica("lora")};
  std::vector<double> losses[2];
  std::thread ranks[2];
  for (int r = 0; r < 2; ++r)
    ranks[r] = std::thread([&, r] {
      Stream d;
      TrainerConfig c = config(3, dir / "run");
      c.save_every = 2;
      try {  // (an exception escaping a thread would end the test binary)
        Trainer t(DataParallelRanks{2, {{models[r].get(), &sum.rank(r), r}}}, d, c);
        EXPECT_EQ(t.writes(), r == 0);
        losses[r] = run_losses(t);
      } catch (const std::exception& e) {
        sum.rank(r).abort();
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(losses[0].size(), 3u);
  EXPECT_TRUE(losses[1].empty()) << "rank 1 reported steps";
  EXPECT_EQ(values(*models[0]), values(*models[1]));
  std::ifstream metrics(dir / "run" / "metrics.jsonl");
  int lines = 0;
  for (std::string l; std::getline(metrics, l);) ++lines;
  EXPECT_EQ(lines, 3) << "one line a step, from rank 0 only";
  EXPECT_TRUE(std::filesystem::exists(dir / "run" / "checkpoints" / "step-2"));
}

}  // namespace
}  // namespace loft::llama
