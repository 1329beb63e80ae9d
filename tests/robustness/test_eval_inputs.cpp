// Evaluation data that holds nothing to score, an --offset past the end, and --subjects naming a
// path: each is an error naming the file or the option, never "accuracy 0/0" with exit 0, and
// never a file read outside --data.
#include "tests/robustness/robustness_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using test::expect_failure;

const char* kHeader = "question,choice0,choice1,choice2,choice3,answer\n";
const char* kRow = "\"What is 1+1?\",1,2,3,4,1\n";

// An MMLU folder with one subject whose dev and test files hold `dev` and `test`.
fs::path mmlu(const test::TempDir& dir, const std::string& dev, const std::string& test) {
  test::write_file(dir / "mmlu" / "dev" / "toy_dev.csv", dev);
  test::write_file(dir / "mmlu" / "test" / "toy_test.csv", test);
  return dir / "mmlu";
}

std::vector<std::string> evaluate(const std::string& task, const fs::path& data, std::vector<std::string> extra = {}) {
  std::vector<std::string> a{"evaluate", "--model", test::stories(), "--device", "cpu", "--task", task,
                             "--data", data.string()};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(Robustness, EmptyMmluFilesAreErrors) {
  test::TempDir dir;
  const std::string rows = std::string(kHeader) + kRow + kRow;
  const fs::path test_file = dir / "mmlu" / "test" / "toy_test.csv";
  expect_failure(evaluate("mmlu", mmlu(dir, rows, ""), {"--shots", "1"}), 1, {test_file.string(), "holds no question"});
  expect_failure(evaluate("mmlu", mmlu(dir, rows, kHeader), {"--shots", "1"}), 1,
                 {test_file.string(), "holds no question (only the header row)"});
  expect_failure(evaluate("mmlu", mmlu(dir, kHeader, rows), {"--shots", "1"}), 1,
                 {(dir / "mmlu" / "dev" / "toy_dev.csv").string(), "holds no question"});
}

// Perplexity writes no report or samples file: asking for one is refused, not silently ignored.
TEST(Robustness, PerplexityRefusesReportAndSamplesFiles) {
  test::TempDir dir;
  test::write_file(dir / "doc.txt", "One upon a time there was a cat.\n");
  for (const char* option : {"--report", "--log-samples"}) {
    expect_failure(evaluate("ppl", dir / "doc.txt", {option, (dir / "out.json").string()}), 2,
                   {option, "is for mmlu, gsm8k and gsm8k-cot"});
    EXPECT_FALSE(fs::exists(dir / "out.json"));
  }
}

TEST(Robustness, MmluOffsetPastTheEndIsAUsageError) {
  test::TempDir dir;
  const std::string rows = std::string(kHeader) + kRow + kRow;
  expect_failure(evaluate("mmlu", mmlu(dir, rows, rows), {"--shots", "1", "--offset", "2"}), 2,
                 {"--offset 2", "past the last test question", "toy_test.csv"});
}

TEST(Robustness, MmluSubjectsStayInsideTheDataFolder) {
  test::TempDir dir;
  const std::string rows = std::string(kHeader) + kRow + kRow;
  const fs::path data = mmlu(dir, rows, rows);
  // A readable CSV outside --data that "../../x" would reach.
  test::write_file(dir / "x_test.csv", rows);
  test::write_file(dir / "x_dev.csv", rows);
  for (const char* s : {"../../x", "../toy", "/etc/passwd", "..", ".hidden", "a\\b"})
    expect_failure(evaluate("mmlu", data, {"--subjects", s}), 2, {"--subjects", "is not a subject name"});
  // An empty item of the list is skipped, as before; the real subject still runs.
  const test::BinaryResult ok = test::run_loft(evaluate("mmlu", data, {"--subjects", "toy,", "--shots", "1"}));
  EXPECT_EQ(ok.code, 0) << ok.err;
}

// A GSM8K folder: train.jsonl and test.jsonl as given.
fs::path gsm8k(const test::TempDir& dir, const std::string& train, const std::string& test) {
  test::write_file(dir / "gsm8k" / "train.jsonl", train);
  test::write_file(dir / "gsm8k" / "test.jsonl", test);
  return dir / "gsm8k";
}

TEST(Robustness, EmptyGsm8kFilesAndOffsetsAreErrors) {
  test::TempDir dir;
  const std::string q = R"({"question": "1+1?", "answer": "2\n#### 2"})" "\n";
  const fs::path test_file = dir / "gsm8k" / "test.jsonl";
  expect_failure(evaluate("gsm8k", gsm8k(dir, q + q, ""), {"--shots", "1"}), 1, {test_file.string(), "holds no question"});
  expect_failure(evaluate("gsm8k", gsm8k(dir, q + q, "\n\n"), {"--shots", "1"}), 1, {test_file.string(), "holds no question"});
  expect_failure(evaluate("gsm8k", gsm8k(dir, "", q), {"--shots", "0"}), 1,
                 {(dir / "gsm8k" / "train.jsonl").string(), "holds no question"});
  expect_failure(evaluate("gsm8k", gsm8k(dir, q + q, q + q), {"--shots", "1", "--offset", "2"}), 2,
                 {"--offset 2", "past the last of the 2 questions", test_file.string()});
}

}  // namespace
}  // namespace loft
