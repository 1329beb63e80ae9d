// loft evaluate --task gsm8k against lm-evaluation-harness (tests/data/reference/eval, HF
// backend in fp32, greedy): through the command with --log-samples, each question's prompt and
// context_enc, and the greedy generation (after the stop-string cut) identical, on the CPU in
// f32; --offset draws and discards the skipped questions' shots; the report; bad input.
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

test::CliResult run_gsm8k_command(const std::string& model, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"evaluate", "--model", test::data_path("models/" + model).string(),
                                   "--task", "gsm8k", "--data", test::data_path("gsm8k").string(),
                                   "--device", "cpu"};
  args.insert(args.end(), extra.begin(), extra.end());
  return test::run_cli_captured(args);
}

void check_model(const std::string& model, int64_t offset, int64_t limit) {
  const auto ref = test::data_path("reference/eval");
  const auto req = read_jsonl(ref / "gsm8k5_requests.jsonl");
  const auto tok = read_jsonl(ref / (model + "-gsm8k5_tokens.jsonl"));
  const auto out = read_jsonl(ref / (model + "-gsm8k5_outputs.jsonl"));
  test::TempDir dir;
  const auto r = run_gsm8k_command(model, {"--offset", cat(offset), "--limit", cat(limit), "--log-samples",
                                           (dir / "s.jsonl").string(), "--report", (dir / "r.json").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto samples = read_jsonl(dir / "s.jsonl");
  ASSERT_EQ(int64_t(samples.size()), limit);
  int64_t strict = 0, flexible = 0;
  for (const json& s : samples) {
    const size_t i = s["index"].get<size_t>();
    ASSERT_LT(i, req.size());
    EXPECT_EQ(s["task"], "gsm8k");
    EXPECT_EQ(s["context"], req[i]["context"]) << i;
    EXPECT_EQ(s["fewshot_indices"], req[i]["fewshot_indices"]) << i;
    // lm-eval's input_ids are the left-truncated context_enc: its tail.
    const auto ids = s["context_ids"].get<std::vector<int32_t>>();
    const auto input = tok[i]["input_ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(ids.size(), input.size() + tok[i]["n_truncated"].get<size_t>()) << i;
    EXPECT_TRUE(std::equal(input.begin(), input.end(), ids.end() - int64_t(input.size()))) << i;
    EXPECT_EQ(s["generation"], out[i]["generation"]) << i;
    EXPECT_EQ(s["generated_tokens"], out[i]["n_generated_tokens"]) << i;
    EXPECT_EQ(s["stop_reason"], out[i]["stop_reason"]) << i;
    EXPECT_EQ(s["target"], req[i]["target_raw"]) << i;
    EXPECT_TRUE(s["extracted"].contains("strict-match"));
    strict += s["exact_match"]["strict-match"].get<int64_t>();
    flexible += s["exact_match"]["flexible-extract"].get<int64_t>();
  }
  const json report = json::parse(std::ifstream(dir / "r.json"));
  EXPECT_EQ(report["task"], "gsm8k");
  EXPECT_EQ(report["protocol"]["shots"], 5);
  EXPECT_EQ(report["protocol"]["seed"], 1234);
  EXPECT_EQ(report["protocol"]["max_gen_toks"], 256);
  EXPECT_EQ(report["protocol"]["chat_template"], false);
  EXPECT_EQ(report["protocol"]["until"], json({"Question:", "</s>", "<|im_end|>"}));
  EXPECT_EQ(report["metrics"]["questions"], limit);
  EXPECT_EQ(report["metrics"]["correct"]["strict-match"], strict);
  EXPECT_EQ(report["metrics"]["correct"]["flexible-extract"], flexible);
}

TEST(EvaluateGsm8k, Stories260kReproducesLmEval) { check_model("stories260K-hf", 0, 8); }
TEST(EvaluateGsm8k, WideRandomReproducesLmEvalFromAnOffset) {
  LOFT_REQUIRE_DATA("models/wide-random");
  check_model("wide-random", 2, 6);
}

TEST(EvaluateGsm8k, CotRunsAndReports) {
  test::TempDir dir;
  const auto r = test::run_cli_captured(
      {"evaluate", "--model", test::data_path("models/stories260K-hf").string(), "--task", "gsm8k-cot",
       "--test", test::data_path("gsm8k/test_first1000.jsonl").string(), "--limit", "1",
       "--max-gen-toks", "16", "--log-samples", (dir / "s.jsonl").string(), "--json", "--device", "cpu"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json report = json::parse(r.out);
  EXPECT_EQ(report["task"], "gsm8k_cot");
  EXPECT_EQ(report["protocol"]["shots"], 8);
  EXPECT_EQ(report["protocol"]["until"], json({"Q:", "</s>", "<|im_end|>"}));
  const auto s = read_jsonl(dir / "s.jsonl");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["target"], "18");
  EXPECT_LE(s[0]["generated_tokens"].get<int>(), 16);
}

TEST(EvaluateGsm8k, BadInputIsAClearError) {
  test::TempDir dir;
  std::ofstream(dir / "train.jsonl") << "{\"question\": \"q\", \"answer\": \"a\\n#### 1\"}\n";
  std::ofstream(dir / "test.jsonl") << "{\"question\": \"q\", \"answer\": \"a\\n#### 1\"}\n"
                                       "{\"question\": \"q\", \"answer\": \"a 1\"}\n";
  auto r = test::run_cli_captured({"evaluate", "--model", test::data_path("models/stories260K-hf").string(),
                                   "--task", "gsm8k", "--data", dir.path().string(), "--device", "cpu"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "test.jsonl:2: the answer has no '####'")) << r.err;
  std::ofstream(dir / "test.jsonl") << "{\"question\": \"q\", \"answer\": \"a\\n#### 1\"}\n";
  r = test::run_cli_captured({"evaluate", "--model", test::data_path("models/stories260K-hf").string(),
                              "--task", "gsm8k", "--data", dir.path().string(), "--device", "cpu"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "--shots 5 is more than the 1 training questions")) << r.err;
  r = test::run_cli_captured({"evaluate", "--model", test::data_path("models/stories260K-hf").string(),
                              "--task", "gsm8k", "--device", "cpu"});
  EXPECT_EQ(r.code, 2);
  for (const auto& [flag, value] : {std::pair{"--slots", "-1"}, {"--max-gen-toks", "-3"}}) {
    r = test::run_cli_captured({"evaluate", "--model", test::data_path("models/stories260K-hf").string(),
                                "--task", "gsm8k", "--data", dir.path().string(), flag, value, "--device", "cpu"});
    EXPECT_EQ(r.code, 2) << flag;
    EXPECT_TRUE(test::contains(r.err, std::string(flag) + ": must be an integer of at least")) << r.err;
  }
}

}  // namespace
}  // namespace loft
