// `loft bench` through the real CLI on the CPU: the JSON report and its arithmetic, the text
// report, gradient checkpointing reaching the model, a real checkpoint, and usage errors.
#include <cmath>
#include <nlohmann/json.hpp>

#include "models/llama/bench_model.h"
#include "models/llama/config.h"
#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"

namespace loft::test {
namespace {

// r·Σ(in + out) over the 7 projections of every layer: the LoRA parameters of a config.
int64_t lora_params(const llama::LlamaConfig& c, int64_t r) {
  int64_t n = 0;
  for (const auto& p : c.projections()) n += r * (p.in + p.out);
  return n * c.num_layers;
}

nlohmann::json bench_json(std::vector<std::string> args) {
  args.insert(args.begin(), {"bench", "--device", "cpu", "--json"});
  const CliResult r = test::run_cli_captured(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);  // exactly one JSON object, nothing else
}

TEST(BenchCommand, TinyShapeJson) {
  const CliResult r =
      test::run_cli_captured({"bench", "--shape", "tiny", "--device", "cpu", "--steps", "2", "--warmup", "1",
               "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NE(r.err.find("bench    tiny"), std::string::npos) << "plan on stderr: " << r.err;
  const llama::LlamaConfig c = *llama::bench_shape_config("tiny");
  EXPECT_EQ(j["shape"], "tiny");
  EXPECT_EQ(j["method"], "lora");
  EXPECT_EQ(j["batch"], 4);
  EXPECT_EQ(j["seq"], 512);
  EXPECT_EQ(j["steps"], 2);
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["rank"], 64);
  EXPECT_EQ(j["grad_checkpointing"], false);
  const int64_t trainable = lora_params(c, 64);
  EXPECT_EQ(j["trainable_parameters"], trainable);
  EXPECT_EQ(j["parameters"], llama::llama_parameter_count(c) + trainable);

  const auto times = j["step_times_s"].get<std::vector<double>>();
  ASSERT_EQ(times.size(), 2u);
  const double med = j["step_time_s_median"], mean = j["step_time_s_mean"];
  EXPECT_GT(times[0], 0);
  EXPECT_GT(times[1], 0);
  EXPECT_DOUBLE_EQ(med, (times[0] + times[1]) / 2);
  EXPECT_DOUBLE_EQ(mean, (times[0] + times[1]) / 2);
  EXPECT_NEAR(double(j["tokens_per_s"]), 4 * 512 / med, 1e-9 * 4 * 512 / med);

  // The peak holds at least the weights, the adapter with its grads and AdamW moments (fp32,
  // 16 B/param) and one layer's [T, intermediate] activations; far less than a GiB.
  const double peak = j["peak_memory_gib"];
  const double floor_bytes = 4.0 * double(llama::llama_parameter_count(c)) +
                             16.0 * double(trainable) + 4.0 * 4 * 512 * 172;
  EXPECT_GT(peak * double(1 << 30), floor_bytes);
  EXPECT_LT(peak, 1.0);
  const double loss = j["last_loss"];
  EXPECT_NEAR(loss, std::log(512.0), 0.5);  // three small steps from a near-uniform model
}

TEST(BenchCommand, StatisticsOverOddStepCountsAndRankOption) {
  const auto j = bench_json({"--shape", "tiny", "--batch", "2", "--seq", "24", "--steps", "3",
                             "--warmup", "0", "--rank", "4", "--alpha", "8"});
  auto times = j["step_times_s"].get<std::vector<double>>();
  ASSERT_EQ(times.size(), 3u);
  std::sort(times.begin(), times.end());
  EXPECT_DOUBLE_EQ(double(j["step_time_s_median"]), times[1]);
  EXPECT_NEAR(double(j["step_time_s_mean"]), (times[0] + times[1] + times[2]) / 3, 1e-12);
  EXPECT_EQ(j["trainable_parameters"], lora_params(*llama::bench_shape_config("tiny"), 4));
  EXPECT_EQ(j["alpha"], 8.0);
}

TEST(BenchCommand, GradCheckpointingSavesMemoryAndKeepsTheMath) {
  const std::vector<std::string> common = {"--shape", "tiny", "--batch", "2", "--seq", "256",
                                           "--steps", "1", "--warmup", "1"};
  auto with_gc = common;
  with_gc.push_back("--grad-checkpointing");
  const auto plain = bench_json(common), gc = bench_json(with_gc);
  EXPECT_EQ(gc["grad_checkpointing"], true);
  EXPECT_LT(double(gc["peak_memory_gib"]), double(plain["peak_memory_gib"]));
  EXPECT_NEAR(double(gc["last_loss"]), double(plain["last_loss"]),
              1e-6 * double(plain["last_loss"]));
}

TEST(BenchCommand, TextReportHasPlanAndTable) {
  const CliResult r = test::run_cli_captured({"bench", "--shape", "tiny", "--device", "cpu", "--batch", "1",
                               "--seq", "16", "--steps", "1", "--warmup", "0"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* part : {"bench    tiny: 2 layers, hidden 64, intermediate 172, 8 heads / 4 KV",
                           "method   lora r=64 alpha=16 on q,k,v,o,gate,up,down",
                           "batch    1 x 16 = 16 tokens/step", "device   cpu, F32 weights",
                           "s/step (med)", "tokens/s", "peak GiB", "\ntiny "})
    EXPECT_TRUE(contains(r.out, part));
}

TEST(BenchCommand, RealCheckpointFolder) {
  const std::string dir = (data_dir() / "models" / "stories260K-hf").string();
  const auto j = bench_json({"--model", dir, "--batch", "1", "--seq", "16", "--steps", "1",
                             "--warmup", "0", "--rank", "8"});
  const llama::LlamaConfig c = llama::load_llama_config(dir);
  EXPECT_EQ(j["shape"], dir);
  EXPECT_EQ(j["trainable_parameters"], lora_params(c, 8));
  EXPECT_EQ(j["parameters"], llama::llama_parameter_count(c) + lora_params(c, 8));
  // A trained model on random tokens: the loss is finite and well above zero.
  EXPECT_GT(double(j["last_loss"]), 1.0);
}

TEST(BenchCommand, UsageErrorsNameTheValue) {
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  const Case cases[] = {
      {{"--shape", "llama-70b"}, "llama-70b"},
      {{"--shape", "tiny", "--method", "qlora-nf4"}, "qlora-nf4"},
      {{}, "--shape"},
      {{"--shape", "tiny", "--model", "/tmp"}, "--model"},
      {{"--shape", "tiny", "--batch", "0"}, "--batch"},
      {{"--shape", "tiny", "--warmup", "-1"}, "--warmup"},
      {{"--shape", "tiny", "--alpha", "0"}, "--alpha"},
      {{"--model", "/nonexistent/model"}, "/nonexistent/model"},
      {{"--shape", "tiny", "--device", "tpu"}, "tpu"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"bench"};
    if (std::find(c.args.begin(), c.args.end(), "--device") == c.args.end())
      args.insert(args.end(), {"--device", "cpu"});
    args.insert(args.end(), c.args.begin(), c.args.end());
    const CliResult r = test::run_cli_captured(args);
    EXPECT_EQ(r.code, 2) << c.says << ": " << r.err;
    EXPECT_TRUE(contains(r.err, c.says));
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

}  // namespace
}  // namespace loft::test
