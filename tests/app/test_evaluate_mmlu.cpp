// loft evaluate --task mmlu against lm-evaluation-harness (tests/data/reference/eval, HF
// backend in fp32): through the command with --log-samples, the prompt, lm-eval's context_enc and
// the four summed log-likelihoods of every reference question (--subjects/--limit/--offset
// selecting them), on the CPU in f32; the report; --offset; bad input.
#include <cmath>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "tests/common/cli_capture.h"
#include "tests/common/eval_util.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

using nlohmann::json;

using test::read_jsonl;


test::CliResult run_mmlu_command(const std::string& model, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"evaluate", "--model", test::data_path("models/" + model).string(),
                                   "--task", "mmlu", "--data", test::data_path("mmlu").string(),
                                   "--device", "cpu"};
  args.insert(args.end(), extra.begin(), extra.end());
  return test::run_cli_captured(args);
}

// Runs the reference's subjects, questions 0..limit-1, and checks every logged sample against
// lm-eval's request, tokens and outputs. Returns the worst relative log-likelihood error.
double check_model(const std::string& model, int64_t limit) {
  const auto ref = test::data_path("reference/eval");
  auto [req, tok, out] = test::read_mmlu_reference(ref, model);
  test::TempDir dir;
  const auto r = run_mmlu_command(model, {"--subjects", "abstract_algebra,high_school_geography,marketing,world_religions",
                                          "--limit", cat(limit), "--log-samples", (dir / "s.jsonl").string(),
                                          "--report", (dir / "r.json").string()});
  EXPECT_EQ(r.code, 0) << r.err;
  const auto samples = read_jsonl(dir / "s.jsonl");
  EXPECT_EQ(int64_t(samples.size()), 4 * limit);
  double worst = 0;
  int64_t correct = 0;
  for (const json& s : samples) {
    const std::string k = test::mmlu_key(s);
    EXPECT_TRUE(req.count(k)) << k;
    if (!req.count(k)) continue;
    EXPECT_EQ(s["task"], "mmlu");
    EXPECT_EQ(s["context"], req[k]["context"]) << k;
    EXPECT_EQ(s["context_ids"], tok[k]["context_enc"]) << k;
    const auto got = s["loglikelihoods"].get<std::vector<double>>();
    const auto want = out[k]["loglikelihoods"].get<std::vector<double>>();
    EXPECT_EQ(got.size(), 4u);
    for (size_t c = 0; c < 4 && c < got.size(); ++c)
      worst = std::max(worst, std::abs(got[c] - want[c]) / std::abs(want[c]));
    size_t best = 0;
    for (size_t c = 1; c < 4; ++c)
      if (want[c] > want[best]) best = c;
    EXPECT_EQ(s["pred"].get<size_t>(), best) << k;
    correct += best == req[k]["gold"].get<size_t>() ? 1 : 0;
  }
  EXPECT_LT(worst, 1e-4) << model;
  const json report = json::parse(std::ifstream(dir / "r.json"));
  EXPECT_EQ(report["task"], "mmlu");
  EXPECT_EQ(report["protocol"]["shots"], 5);
  EXPECT_EQ(report["protocol"]["lm_eval_commit"], "4e7e0d47f33bc71070c1d38394bafbb52b117163");
  EXPECT_EQ(report["method"], "lora");
  EXPECT_EQ(report["metrics"]["questions"], 4 * limit);
  EXPECT_EQ(report["metrics"]["correct"], correct);
  EXPECT_EQ(report["metrics"]["categories"]["stem"]["questions"], limit);
  EXPECT_EQ(report["metrics"]["subjects"]["marketing"]["questions"], limit);
  ::testing::Test::RecordProperty("worst_rel_error", cat(worst));
  std::cerr << model << ": worst relative log-likelihood error " << worst << "\n";
  return worst;
}

TEST(EvaluateMmlu, Stories260kReproducesLmEval) { check_model("stories260K-hf", 10); }
TEST(EvaluateMmlu, WideRandomReproducesLmEval) {
  LOFT_REQUIRE_DATA("models/wide-random");
  check_model("wide-random", 2);
}

TEST(EvaluateMmlu, OffsetGivesTheFullRunPromptAndJsonReport) {
  const auto ref = read_jsonl(test::data_path("reference/eval/stories260K-hf-mmlu5_outputs.jsonl"));
  test::TempDir dir;
  const auto r = run_mmlu_command("stories260K-hf", {"--subjects", "marketing", "--offset", "7", "--limit", "2",
                                                     "--log-samples", (dir / "s.jsonl").string(), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto samples = read_jsonl(dir / "s.jsonl");
  ASSERT_EQ(samples.size(), 2u);
  const auto requests = read_jsonl(test::data_path("reference/eval/mmlu5_requests.jsonl"));
  for (const json& s : samples)
    for (const json& q : requests)
      if (test::mmlu_key(q) == test::mmlu_key(s)) EXPECT_EQ(s["context"], q["context"]);
  EXPECT_EQ(samples[0]["index"], 7);
  EXPECT_EQ(samples[1]["index"], 8);
  const json report = json::parse(r.out);
  EXPECT_EQ(report["metrics"]["questions"], 2);
  EXPECT_EQ(report["protocol"]["offset"], 7);
  EXPECT_TRUE(test::contains(r.err, "ETA"));
}

TEST(EvaluateMmlu, BadInputIsAClearError) {
  auto r = run_mmlu_command("stories260K-hf", {"--subjects", "cooking"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "cooking_dev.csv")) << r.err;
  r = run_mmlu_command("stories260K-hf", {"--subjects", "marketing", "--shots", "6"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "--shots 6 is more than the 5 dev questions of marketing")) << r.err;
  test::TempDir dir;
  std::filesystem::create_directories(dir / "dev");
  std::filesystem::create_directories(dir / "test");
  std::ofstream(dir / "dev" / "x_dev.csv") << "q,a,b,c,d,A\n";
  std::ofstream(dir / "test" / "x_test.csv") << "q,a,b,c,d,A\nq2,a,b,c\n";
  r = test::run_cli_captured({"evaluate", "--model", test::data_path("models/stories260K-hf").string(),
                              "--task", "mmlu", "--data", dir.path().string(), "--shots", "1", "--device", "cpu"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "x_test.csv:2: 4 columns, expected 6")) << r.err;
  r = test::run_cli_captured({"evaluate", "--model", test::data_path("models/stories260K-hf").string(),
                              "--task", "mmlu", "--device", "cpu"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::contains(r.err, "--data")) << r.err;
}

// A prompt longer than the context is left-truncated (documented, as lm-eval): stories260K's
// context is 512 tokens and every 5-shot abstract_algebra prompt is longer; the check_model test
// above compares those truncated scores with lm-eval's. Here: a question far longer than the
// context still scores.
TEST(EvaluateMmlu, APromptLongerThanTheContextIsTruncated) {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "dev");
  std::filesystem::create_directories(dir / "test");
  std::ofstream(dir / "dev" / "x_dev.csv") << "q,a,b,c,d,A\n";
  std::string long_q(6000, 'w');
  std::ofstream(dir / "test" / "x_test.csv") << long_q << ",a,b,c,d,B\n";
  const auto r = test::run_cli_captured({"evaluate", "--model", test::data_path("models/stories260K-hf").string(),
                                         "--task", "mmlu", "--data", dir.path().string(), "--shots", "1",
                                         "--device", "cpu", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["metrics"]["questions"], 1);
}

}  // namespace
}  // namespace loft
