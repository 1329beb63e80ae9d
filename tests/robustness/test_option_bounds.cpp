// Option values reachable from the command line: each bad value is a usage error (exit 2) naming
// the option, checked where it enters (app/option_checks.*), never an assert deeper down, a wrapped
// integer or a value silently replaced.
#include "tests/robustness/robustness_util.h"

namespace loft {
namespace {

using test::expect_failure;
using test::stories;

std::vector<std::string> generate(std::vector<std::string> extra) {
  std::vector<std::string> a{"generate", "--model", stories(), "--prompt", "Once", "--device", "cpu"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(Robustness, GenerateSamplingOptionsAreUsageErrors) {
  for (const char* t : {"nan", "-1", "inf", "1e999", "0.5x"})
    expect_failure(generate({"--temperature", t}), 2, {"--temperature", "finite number"});
  expect_failure(generate({"--top-k", "-1"}), 2, {"--top-k", "at least 0"});
  for (const char* p : {"0", "2", "nan", "-0.5"}) expect_failure(generate({"--top-p", p}), 2, {"--top-p", "(0, 1]"});
  expect_failure(generate({"--seed", "-1"}), 2, {"--seed", "at least 0"});
  expect_failure(generate({"--slots", "0"}), 2, {"--slots"});
  expect_failure(generate({"--max-new-tokens", "0"}), 2, {"--max-new-tokens"});
}

TEST(Robustness, MaxNewTokensBeyondTheContextIsAUsageError) {
  // 2^63-1 new tokens: the sum with the prompt's length overflows; 600 merely exceeds the context.
  expect_failure(generate({"--max-new-tokens", "9223372036854775807"}), 2, {"--max-new-tokens", "overflows"});
  expect_failure(generate({"--max-new-tokens", "600"}), 2, {"--max-new-tokens 600", "context of 512"});
}

std::vector<std::string> finetune(const std::filesystem::path& out, std::vector<std::string> extra) {
  std::vector<std::string> a{"finetune", "--model", stories(), "--data", test::demo_data(), "--out", out.string(),
                             "--steps", "2", "--batch", "2", "--seq", "128", "--device", "cpu"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(Robustness, FinetuneSeedAndWarmupAreBounded) {
  test::TempDir dir;
  expect_failure(finetune(dir / "a", {"--seed", "-1"}), 2, {"--seed", "at least 0"});
  expect_failure(finetune(dir / "b", {"--warmup", "1e18"}), 2, {"--warmup", "more than the run's 2 steps"});
}

std::vector<std::string> bench(std::vector<std::string> extra) {
  std::vector<std::string> a{"bench", "step", "--shape", "tiny", "--device", "cpu", "--steps", "1", "--warmup", "0",
                             "--profile-steps", "0"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(Robustness, BenchSizesAreBoundedAsFinetuneBoundsThem) {
  expect_failure(bench({"--seq", "1"}), 2, {"--seq", "from 2 to 1048576"});
  expect_failure(bench({"--lora-rank", "1000000"}), 2, {"--lora-rank", "from 1 to 65536"});
  expect_failure(bench({"--rank", "1000000"}), 2, {"--rank", "from 1 to 65536"});
  expect_failure(bench({"--batch", "0"}), 2, {"--batch", "from 1 to 1048576"});
  expect_failure({"bench", "step", "--shape", "tiny", "--device", "cpu", "--warmup", "1e18"}, 2, {"--warmup"});
  expect_failure(bench({"--lora-alpha", "nan"}), 2, {"--lora-alpha"});
  expect_failure(bench({"--alpha", "nan"}), 2, {"--alpha"});
  expect_failure(bench({"--seed", "-1"}), 2, {"--seed"});
  expect_failure({"bench", "eval", "--task", "decode", "--shape", "tiny", "--tokenizer", stories(), "--device", "cpu",
                  "--max-gen-toks", "1"},
                 2, {"--max-gen-toks must be >= 2 for --eval decode"});
}

std::vector<std::string> evaluate(std::vector<std::string> extra) {
  std::vector<std::string> a{"evaluate", "--model", stories(), "--device", "cpu"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(Robustness, EvaluateCountsAreBounded) {
  expect_failure(evaluate({"--task", "mmlu", "--data", "x", "--shots", "-5"}), 2, {"--shots", "at least 0"});
  expect_failure(evaluate({"--task", "ppl", "--data", "x", "--batch-tokens", "0"}), 2, {"--batch-tokens"});
  expect_failure(evaluate({"--task", "ppl", "--data", "x", "--batch-tokens", "-1"}), 2, {"--batch-tokens"});
  expect_failure(evaluate({"--task", "gsm8k", "--data", "x", "--seed", "-1"}), 2, {"--seed", "at least 0"});
  expect_failure(evaluate({"--task", "gsm8k", "--data", "x", "--offset", "-3"}), 2, {"--offset"});
  expect_failure(evaluate({"--task", "gsm8k", "--data", "x", "--limit", "0"}), 2, {"--limit"});
  expect_failure(evaluate({"--task", "gsm8k", "--data", "x", "--max-gen-toks", "0"}), 2, {"--max-gen-toks"});
}

}  // namespace
}  // namespace loft
