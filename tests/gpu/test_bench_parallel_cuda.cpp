// `loft bench --gpus` on real GPUs (engine/train/bench_parallel.h through NCCL). One GPU: --gpus 1
// (a world of one through NCCL, whose all-reduce leaves the gradients as they are) reports the
// plain bench's last_loss within 1e-6 relative, for lora and falqon. Two GPUs and four (skipped
// with fewer): the command reports N × the batch's tokens per step as a world of N, and the
// replicas are bit-identical after the timed steps (NCCL gives every rank the same sum), with the
// loss of one GPU on the same batch. Prints tokens/s, ms per step and the scaling over one GPU.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/device/memory.h"
#include "engine/parallel/grad_reducer.h"
#include "engine/peft/method.h"
#include "engine/train/bench_parallel.h"
#include "engine/train/rank_workers.h"
#include "models/llama/bench_model.h"
#include "models/llama/model.h"
#include "tests/common/cli_capture.h"
#include "tests/gpu/test_ops_cuda_util.h"
#include "tests/common/every_method.h"

namespace loft::test {
namespace {

const std::vector<std::string> kShape = {"--shape", "tinyllama-1.1b", "--batch", "2", "--seq", "256",
                                         "--steps", "3", "--warmup", "1", "--method", "lora,falqon",
                                         "--json"};

nlohmann::json bench(std::vector<std::string> extra) {
  std::vector<std::string> args = {"bench", "step"};
  args.insert(args.end(), kShape.begin(), kShape.end());
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult r = run_cli_captured(args);
  EXPECT_EQ(r.code, 0) << r.err;
  if (r.code != 0) return nlohmann::json::object();
  return nlohmann::json::parse(r.out);
}

void print_scaling(const nlohmann::json& one, const nlohmann::json& n, size_t m) {
  const double t1 = one["methods"][m]["tokens_per_s"], tn = n["methods"][m]["tokens_per_s"];
  std::printf("[bench --gpus %d] %s: one GPU %.0f tokens/s (%.2f ms/step), %d GPUs %.0f tokens/s "
              "(%.2f ms/step): scaling %.2fx\n",
              int(n["world_size"]), n["methods"][m]["method"].get<std::string>().c_str(), t1,
              1e3 * double(one["methods"][m]["step_s"]), int(n["world_size"]), tn,
              1e3 * double(n["methods"][m]["step_s"]), tn / t1);
}

TEST(BenchParallelCuda, WorldOfOneMatchesThePlainBench) {
  LOFT_REQUIRE_GPU();
  const auto one = bench({"--device", "cuda:0", "--profile-steps", "0"});
  const auto dp = bench({"--gpus", "1"});
  ASSERT_EQ(one["methods"].size(), 2u);
  ASSERT_EQ(dp["methods"].size(), 2u);
  EXPECT_TRUE(one["gpus"].is_null());
  EXPECT_EQ(dp["gpus"], nlohmann::json::array({0}));
  EXPECT_EQ(dp["world_size"], 1);
  EXPECT_EQ(dp["profiled_steps"], 0);
  for (size_t m = 0; m < 2; ++m) {
    SCOPED_TRACE(one["methods"][m]["method"].get<std::string>());
    const double want = one["methods"][m]["last_loss"], got = dp["methods"][m]["last_loss"];
    EXPECT_NEAR(got, want, 1e-6 * want);
    EXPECT_EQ(dp["methods"][m]["tokens_per_step"], 2 * 256);
    print_scaling(one, dp, m);
  }
}

TEST(BenchParallelCuda, TwoAndFourGpusCountEveryGpu) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 CUDA GPUs, this machine has " << cuda_device_count();
  const auto one = bench({"--device", "cuda:0", "--profile-steps", "0"});
  for (int n : {2, 4}) {
    if (cuda_device_count() < n) {
      std::printf("[bench --gpus %d] skipped: this machine has %d GPUs\n", n, cuda_device_count());
      continue;
    }
    SCOPED_TRACE(n);
    const auto dp = bench({"--gpus", std::to_string(n)});
    ASSERT_EQ(dp["methods"].size(), 2u);
    EXPECT_EQ(dp["world_size"], n);
    EXPECT_EQ(dp["gpus"].size(), size_t(n));
    for (size_t m = 0; m < 2; ++m) {
      SCOPED_TRACE(dp["methods"][m]["method"].get<std::string>());
      EXPECT_EQ(dp["methods"][m]["fits"], true);
      EXPECT_EQ(dp["methods"][m]["tokens_per_step"], int64_t(n) * 2 * 256);
      // The same batch on every rank: the step's mean loss is one GPU's (bf16 kernels on
      // gradients summed in another order can move the params by an ulp, hence not 1e-6).
      const double want = one["methods"][m]["last_loss"], got = dp["methods"][m]["last_loss"];
      EXPECT_NEAR(got, want, 1e-3 * want);
      print_scaling(one, dp, m);
    }
  }
}

// A replica of tinyllama-1.1b's shape (bf16, LoRA r=64 or FALQON), its optimizer and a batch of
// 2 × 256 random tokens, identical on every GPU.
struct Replica {
  std::unique_ptr<llama::LlamaModel> model;
  std::unique_ptr<AdamW> optimizer;
  ModelBatch batch;
  Replica(const std::string& method, Device dev) {
    const llama::LlamaConfig cfg = *llama::bench_shape_config("tinyllama-1.1b");
    MethodOptions m{method, {64, 16.0f}, parse_lora_targets("all"), 0};
    apply_method_invariants(m);
    std::mt19937_64 rng(5);
    model = std::make_unique<llama::LlamaModel>(cfg, llama::random_llama_weights(cfg, DType::BF16, dev, 9),
                                                make_linear_factory(m, rng));
    optimizer = std::make_unique<AdamW>(model->params(), AdamWConfig{.weight_decay = 0.01});
    std::mt19937 tok(13);
    std::uniform_int_distribution<int32_t> id(0, int32_t(cfg.vocab_size - 1));
    std::vector<int32_t> ids(2 * 256);
    for (int32_t& t : ids) t = id(tok);
    batch = make_batch(ids, ids, {}, 2, 256, dev);
  }
};

TEST(BenchParallelCuda, ReplicasStayBitIdenticalThroughNccl) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 CUDA GPUs, this machine has " << cuda_device_count();
  const BenchSchedule schedule{.warmup = 1, .steps = 3, .profiled = 0, .lr = 2e-4, .max_grad_norm = 0.3};
  for (const std::string& method : test::one_method_per_update_kind()) {
    SCOPED_TRACE(method);
    for (int n : {2, 4}) {
      if (cuda_device_count() < n) continue;
      SCOPED_TRACE(n);
      std::vector<Device> devices;
      std::vector<int> gpus;
      for (int g = 0; g < n; ++g) {
        devices.push_back(Device::cuda(g));
        gpus.push_back(g);
      }
      std::vector<std::unique_ptr<Replica>> reps(static_cast<size_t>(n));
      RankWorkers(devices).run([&](size_t i) { reps[i] = std::make_unique<Replica>(method, devices[i]); });
      auto comms = make_communicators(gpus);
      std::vector<std::unique_ptr<GradReducer>> reducers;
      std::vector<BenchRank> ranks;
      for (size_t i = 0; i < size_t(n); ++i) {
        reducers.push_back(std::make_unique<GradReducer>(*comms[i]));
        ranks.push_back({reps[i]->model.get(), reps[i]->optimizer.get(), &reps[i]->batch,
                         reducers.back().get(), devices[i]});
      }
      const BenchTimes t = time_parallel_training_steps(ranks, schedule);
      EXPECT_EQ(t.tokens_per_step, int64_t(n) * 2 * 256);
      std::printf("[bench_parallel %s x%d] %.0f tokens/s, %.2f ms/step, peak %.2f GiB per GPU\n",
                  method.c_str(), n, t.tokens_per_s, 1e3 * t.median_s, double(t.peak_bytes) / double(1 << 30));
      std::vector<std::vector<float>> want;
      for (Param* p : reps[0]->model->params()) want.push_back(p->value.to_float_vector());
      for (size_t i = 1; i < size_t(n); ++i) {
        size_t k = 0;
        for (Param* p : reps[i]->model->params())
          ASSERT_EQ(p->value.to_float_vector(), want[k++]) << "rank " << i << " param " << p->name;
      }
      reps.clear();
      for (const Device& d : devices) release_cached_memory(d);
    }
  }
}

}  // namespace
}  // namespace loft::test
