// loft evaluate on the GPU (bf16 weights and activations) against lm-evaluation-harness's fp32
// references (tests/data/reference/eval) and against the CPU: MMLU prompts and token ids
// exact, log-likelihoods within bf16 tolerance (stories260K's 64-wide layers in bf16: a few %);
// GSM8K prompts and token ids exact, greedy generations compared and counted (bf16 rounding flips
// the near-ties of these tiny random-ish models early: 1 of 8 stories260K generations stays
// identical; the decoder's own numerics are checked in test_decode_cuda.cpp, F32 on the GPU
// against the CPU at 1e-4); every method's adapter evaluated on the GPU as on the CPU.
#include <cmath>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "engine/peft/halo_weight.h"
#include "engine/peft/method.h"
#include "engine/peft/peft_adapter.h"
#include "eval/mmlu.h"
#include "models/llama/loading.h"
#include "tests/common/cli_capture.h"
#include "tests/common/eval_util.h"
#include "tests/common/test_util.h"
#include "tests/common/train_a_little.h"
#include "tests/common/every_method.h"
#include "tokenizer/tokenizer.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::read_jsonl;


void check_mmlu(const std::string& model) {
  LOFT_REQUIRE_GPU();
  const auto ref = test::data_path("reference/eval");
  auto [req, tok, out] = test::read_mmlu_reference(ref, model);
  test::TempDir dir;
  const auto r = test::run_cli_captured(
      {"evaluate", "--model", test::data_path("models/" + model).string(), "--task", "mmlu", "--data",
       test::data_path("mmlu").string(), "--subjects", "abstract_algebra,high_school_geography,marketing,world_religions",
       "--limit", "3", "--log-samples", (dir / "s.jsonl").string(), "--device", "cuda"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto samples = read_jsonl(dir / "s.jsonl");
  ASSERT_EQ(samples.size(), 12u);
  double worst = 0;
  for (const json& s : samples) {
    const std::string k = test::mmlu_key(s);
    ASSERT_TRUE(req.count(k)) << k;
    EXPECT_EQ(s["context"], req[k]["context"]) << k;
    EXPECT_EQ(s["context_ids"], tok[k]["context_enc"]) << k;
    const auto got = s["loglikelihoods"].get<std::vector<double>>();
    const auto want = out[k]["loglikelihoods"].get<std::vector<double>>();
    for (size_t c = 0; c < 4; ++c) worst = std::max(worst, std::abs(got[c] - want[c]) / std::abs(want[c]));
  }
  ::testing::Test::RecordProperty("worst_rel_error", cat(worst));
  std::cerr << model << " mmlu on the GPU (bf16): worst relative log-likelihood error " << worst << "\n";
  EXPECT_LT(worst, 5e-2) << model;
}

TEST(EvalCuda, MmluStories260kWithinBf16) { check_mmlu("stories260K-hf"); }
TEST(EvalCuda, MmluWideRandomWithinBf16) { check_mmlu("wide-random"); }

void check_gsm8k(const std::string& model) {
  LOFT_REQUIRE_GPU();
  const auto ref = test::data_path("reference/eval");
  const auto req = read_jsonl(ref / "gsm8k5_requests.jsonl");
  const auto tok = read_jsonl(ref / (model + "-gsm8k5_tokens.jsonl"));
  const auto out = read_jsonl(ref / (model + "-gsm8k5_outputs.jsonl"));
  const int64_t n = std::min<int64_t>(8, int64_t(out.size()));
  test::TempDir dir;
  const auto r = test::run_cli_captured(
      {"evaluate", "--model", test::data_path("models/" + model).string(), "--task", "gsm8k", "--data",
       test::data_path("gsm8k").string(), "--limit", cat(n), "--log-samples", (dir / "s.jsonl").string(),
       "--device", "cuda"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto samples = read_jsonl(dir / "s.jsonl");
  ASSERT_EQ(int64_t(samples.size()), n);
  int64_t same = 0;
  for (int64_t i = 0; i < n; ++i) {
    const json& s = samples[size_t(i)];
    EXPECT_EQ(s["context"], req[size_t(i)]["context"]) << i;
    // lm-eval's input_ids are the left-truncated context_enc: its tail.
    const auto ids = s["context_ids"].get<std::vector<int32_t>>();
    const auto input = tok[size_t(i)]["input_ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(ids.size(), input.size() + tok[size_t(i)]["n_truncated"].get<size_t>()) << i;
    EXPECT_TRUE(std::equal(input.begin(), input.end(), ids.end() - int64_t(input.size()))) << i;
    EXPECT_FALSE(s["generation"].get<std::string>().empty()) << i;
    same += s["generation"] == out[size_t(i)]["generation"] ? 1 : 0;
  }
  ::testing::Test::RecordProperty("identical_generations", cat(same, "/", n));
  std::cerr << model << " gsm8k on the GPU (bf16): " << same << "/" << n << " generations identical to lm-eval's\n";
  EXPECT_GE(same, 1) << model;
}

TEST(EvalCuda, Gsm8kStories260kPromptsExact) { check_gsm8k("stories260K-hf"); }
TEST(EvalCuda, Gsm8kWideRandomPromptsExact) { check_gsm8k("wide-random"); }

// Each method's adapter, trained a little on the CPU, scored on the GPU with its recorded method
// (the backbone the method keeps: NF4, FP8, rotated int8) as on the CPU.
class EvalCudaAdapter : public ::testing::TestWithParam<std::string> {};

TEST_P(EvalCudaAdapter, ScoresAsOnTheCpu) {
  LOFT_REQUIRE_GPU();
  const fs::path model_dir = test::data_path("models/stories260K-hf");
  MethodOptions m;
  m.method = GetParam();
  m.lora = {4, 8.0f};
  m.targets = parse_lora_targets("all");
  if (m.method == "halo") m.get<HaloOptions>() = {1, quant::LowpFormat::INT8};
  test::TempDir dir;
  std::mt19937_64 rng(3);
  auto model = llama::load_model(model_dir, Device::cpu(), make_linear_factory(m, rng));
  test::train_a_little(*model, 3);
  save_peft_adapter(dir / "a", llama::extract_adapter(*model, m, model_dir.string()));
  const auto run = [&](const char* device) {
    const auto r = test::run_cli_captured({"evaluate", "--model", model_dir.string(), "--adapter", (dir / "a").string(),
                                           "--task", "mmlu", "--data", test::data_path("mmlu").string(),
                                           "--subjects", "marketing", "--limit", "3", "--log-samples",
                                           (dir / cat(device, ".jsonl")).string(), "--json", "--device", device});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["method"], m.method);
    return read_jsonl(dir / cat(device, ".jsonl"));
  };
  const auto cpu = run("cpu"), gpu = run("cuda");
  ASSERT_EQ(cpu.size(), gpu.size());
  double worst = 0;
  for (size_t i = 0; i < cpu.size(); ++i)
    for (size_t c = 0; c < 4; ++c) {
      const double want = cpu[i]["loglikelihoods"][c].get<double>(), got = gpu[i]["loglikelihoods"][c].get<double>();
      worst = std::max(worst, std::abs(got - want) / std::abs(want));
    }
  ::testing::Test::RecordProperty("worst_rel_error_vs_cpu", cat(worst));
  std::cerr << m.method << " adapter, mmlu on the GPU (bf16) against the CPU (f32): worst relative error " << worst << "\n";
  // stories260K's 64-wide layers in bf16 move a summed log-likelihood by up to ~10% for the
  // quantized backbones (measured on the H100: lora 0.0066, halo 0.025, qlora 0.092 with NF4
  // decoded to bf16, falqon 0.104 with E4M3 codes against the bf16 base's scale); the kernels' own
  // accuracy is tested per op.
  EXPECT_LT(worst, 0.15) << m.method;
  const auto g = test::run_cli_captured({"evaluate", "--model", model_dir.string(), "--adapter", (dir / "a").string(),
                                         "--task", "gsm8k", "--data", test::data_path("gsm8k").string(),
                                         "--limit", "2", "--max-gen-toks", "16", "--json", "--device", "cuda"});
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(json::parse(g.out)["method"], m.method);
  EXPECT_EQ(json::parse(g.out)["metrics"]["questions"], 2);
}

INSTANTIATE_TEST_SUITE_P(Methods, EvalCudaAdapter, test::every_method(), test::method_test_name);

}  // namespace
}  // namespace loft
