// The data-parallel Trainer on GPUs through NCCL (docs/multi-gpu.md). One GPU: a run through the
// NCCL path (a world of one, GradReducer on a real communicator) equals the plain one-device
// Trainer — the same loss every step and bit-identical adapters. Two GPUs (skipped on one): the
// loss curve of 2 ranks equals one GPU taking the same micro-batches within bf16 tolerance, the
// replicas stay bit-identical (the trainer's digest check after every step), and a rank that
// fails makes the other stop with that rank's error in seconds, not after the NCCL timeout.
#include <chrono>
#include <cstdio>
#include <random>

#include "engine/device/memory.h"
#include "engine/parallel/grad_reducer.h"
#include "engine/parallel/nccl_comm.h"
#include "engine/peft/method.h"
#include "engine/train/trainer.h"
#include "models/llama/bench_model.h"
#include "models/llama/model.h"
#include "tests/common/tiny_llama.h"
#include "tests/common/token_stream.h"
#include "tests/gpu/test_ops_cuda_util.h"
#include "tests/common/every_method.h"

namespace loft::test {
namespace {

#define LOFT_REQUIRE_GPUS(n)                                                               \
  if (cuda_device_count() < (n))                                                           \
  GTEST_SKIP() << "needs " << (n) << " CUDA GPUs, this machine has " << cuda_device_count()

std::unique_ptr<llama::LlamaModel> replica(const std::string& method, Device d) {
  bind_thread(d);
  const llama::LlamaConfig c = tiny_llama_config();
  MethodOptions m{method, {8, 16.0f}, parse_lora_targets("all"), 0};
  apply_method_invariants(m);
  std::mt19937_64 rng(1);
  return std::make_unique<llama::LlamaModel>(c, llama::random_llama_weights(c, DType::BF16, d, 3),
                                             make_linear_factory(m, rng));
}

TrainerConfig config(int64_t steps) {
  TrainerConfig c;
  c.steps = steps;
  c.grad_accum = 4;
  c.schedule = {ScheduleKind::Constant, 1e-3, 0, steps};
  c.max_grad_norm = 1.0;
  c.quiet = true;
  c.check_replicas_every = 1;
  return c;
}

std::vector<double> losses(Trainer& t) {
  std::vector<double> out;
  t.run([&](const StepMetrics& m) { out.push_back(m.loss); });
  return out;
}

std::vector<std::vector<float>> values(llama::LlamaModel& m) {
  std::vector<std::vector<float>> v;
  for (Param* p : m.params()) v.push_back(p->value.to_float_vector());
  return v;
}

TEST(DataParallelCuda, AWorldOfOneThroughNcclEqualsThePlainTrainer) {
  LOFT_REQUIRE_GPU();
  for (const std::string& method : method_names()) {
    SCOPED_TRACE(method);
    auto plain = replica(method, kGpu);
    TokenStream d1(kGpu);
    Trainer t1(*plain, d1, config(4));
    const std::vector<double> want = losses(t1);

    auto comms = make_communicators({kGpu.index});
    GradReducer reducer(*comms[0]);
    auto ranked = replica(method, kGpu);
    TokenStream d2(kGpu);
    Trainer t2(DataParallelRanks{1, {{ranked.get(), &reducer, 0}}}, d2, config(4));
    const std::vector<double> got = losses(t2);
    ASSERT_EQ(got.size(), want.size());
    for (size_t s = 0; s < got.size(); ++s) EXPECT_NEAR(got[s], want[s], 1e-12 * want[s]) << "step " << s + 1;
    EXPECT_EQ(values(*ranked), values(*plain)) << "the NCCL path changed the adapter";
  }
}

TEST(DataParallelCuda, TwoGpusMatchOneGpuAndStayIdentical) {
  LOFT_REQUIRE_GPUS(2);
  for (const std::string& method : test::one_method_per_update_kind()) {
    SCOPED_TRACE(method);
    auto one = replica(method, kGpu);
    TokenStream d1(kGpu);
    Trainer t1(*one, d1, config(5));
    const std::vector<double> want = losses(t1);

    auto comms = make_communicators({0, 1});
    GradReducer r0(*comms[0]), r1(*comms[1]);
    auto m0 = replica(method, Device::cuda(0)), m1 = replica(method, Device::cuda(1));
    TokenStream d2(Device::cpu());
    Trainer t2(DataParallelRanks{2, {{m0.get(), &r0, 0}, {m1.get(), &r1, 1}}}, d2, config(5));
    const auto start = std::chrono::steady_clock::now();
    const std::vector<double> got = losses(t2);
    std::printf("[dp] %s: 5 steps on 2 GPUs in %.1f ms\n", method.c_str(),
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    ASSERT_EQ(got.size(), want.size());
    for (size_t s = 0; s < got.size(); ++s) {
      std::printf("[dp] %s step %zu: one GPU %.6f, two GPUs %.6f\n", method.c_str(), s + 1, want[s], got[s]);
      EXPECT_NEAR(got[s], want[s], 2e-3 * want[s]) << "step " << s + 1;
    }
    EXPECT_EQ(values(*m0), values(*m1));
  }
}

// Throws from its forward, as an out-of-memory would, on one rank.
class FailingModel : public TrainableModel {
 public:
  explicit FailingModel(llama::LlamaModel& inner) : inner_(inner) {}
  LossSums forward_backward(const ModelBatch&, float) override { throw Error("rank 1 failed (test)"); }
  LossSums evaluate(const ModelBatch& b) override { return inner_.evaluate(b); }
  std::vector<Param*> params() override { return inner_.params(); }
  void after_step() override {}
  void refresh_copies() override {}

 private:
  llama::LlamaModel& inner_;
};

TEST(DataParallelCuda, AFailingRankStopsItsPeerAtOnce) {
  LOFT_REQUIRE_GPUS(2);
  auto comms = make_communicators({0, 1});
  GradReducer r0(*comms[0]), r1(*comms[1]);  // the default 300 s timeout: it must not be reached
  auto m0 = replica("lora", Device::cuda(0)), m1 = replica("lora", Device::cuda(1));
  FailingModel bad(*m1);
  TokenStream d(Device::cpu());
  Trainer t(DataParallelRanks{2, {{m0.get(), &r0, 0}, {&bad, &r1, 1}}}, d, config(2));
  const auto start = std::chrono::steady_clock::now();
  try {
    t.run();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rank 1 failed (test)");
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[dp] the peer of a failed rank stopped after %.2f s\n", s);
  EXPECT_LT(s, 30.0);
}

}  // namespace
}  // namespace loft::test
