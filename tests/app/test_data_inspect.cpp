// `loft data inspect` through the real CLI: the report for real files with the real tokenizers,
// its numbers against the library, and exit codes (2 usage, 1 bad data) with one-line errors.
#include <gtest/gtest.h>

#include "datasets/inspect.h"
#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"
#include "tests/datasets/fake_tokenizer.h"

namespace loft {
namespace {

using test::run_cli_captured;

std::string data(const char* rel) { return test::data_path(rel).string(); }
const std::string kStoriesModel = test::data_path("models/stories260K-hf").string();

size_t occurrences(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

TEST(DataInspectCommand, AlpacaReportMatchesTheLibrary) {
  const auto r = run_cli_captured(
      {"data", "inspect", data("alpaca/alpaca_small.json"), "--model", kStoriesModel, "--seq", "256", "--examples", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_EQ(occurrences(r.out, "-- example "), 2u) << r.out;
  EXPECT_EQ(occurrences(r.out, "[["), 2u) << r.out;
  EXPECT_TRUE(test::contains(r.out, "(format alpaca, template alpaca)"));
  EXPECT_TRUE(test::contains(r.out, "-- example 1 at " + data("alpaca/alpaca_small.json") + ":2: "));

  const auto tok = load_tokenizer(kStoriesModel);
  data::InspectOptions opt;
  opt.seq = 256;
  opt.examples = 2;
  const auto want = data::inspect_file(data("alpaca/alpaca_small.json"), opt, *tok);
  std::ostringstream expected;
  data::print_inspection(expected, want, opt);
  EXPECT_EQ(r.out, expected.str());
  const auto& l = want.lengths;
  EXPECT_EQ(l.count(), 2000);
  EXPECT_TRUE(test::contains(r.out, "examples       2000\n"));
  EXPECT_TRUE(test::contains(r.out, "min " + std::to_string(l.min()) + ", mean "));
  EXPECT_TRUE(test::contains(r.out, ", p90 " + std::to_string(l.percentile(90)) + ", p99 " +
                                        std::to_string(l.percentile(99)) + ", max " + std::to_string(l.max())));
  EXPECT_TRUE(test::contains(r.out, std::to_string(l.total()) + " total, " + std::to_string(want.trained_tokens) + " trained"));
  EXPECT_TRUE(test::contains(r.out, "at --seq 256   " + std::to_string(l.count_above(256)) + " examples truncated"));
  EXPECT_TRUE(test::contains(r.out, "bad records    0 skipped\n"));
}

TEST(DataInspectCommand, SeveralFilesCompressedAndTheLlama2Tokenizer) {
  test::TempDir dir;
  test::write_file(dir / "train.jsonl.zst", test::zstd_compress(test::read_file(data("gsm8k/train.jsonl"))));
  const auto r = run_cli_captured({"data", "inspect", (dir / "train.jsonl.zst").string(),
                                   data("tinystories/tinystories_sample.txt"), "--tokenizer",
                                   data("tokenizers/llama2/tokenizer.model"), "--examples", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "train.jsonl.zst (format gsm8k, template alpaca)"));
  EXPECT_TRUE(test::contains(r.out, "examples       7473\n"));
  EXPECT_TRUE(test::contains(r.out, "tinystories_sample.txt (format text, template plain)"));
  EXPECT_TRUE(test::contains(r.out, "examples       5\n"));
  // A text record trains everything after BOS.
  EXPECT_TRUE(test::contains(r.out, "<bos>[[Once upon a time there was a little boy named Ben."));
}

TEST(DataInspectCommand, TemplateFormatAndTrainOnInputsOptions) {
  test::TempDir dir;
  test::write_file(dir / "chat.jsonl",
                   "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
                   "\"content\": \"Hello\"}]}\n");
  auto r = run_cli_captured({"data", "inspect", (dir / "chat.jsonl").string(), "--model", kStoriesModel,
                             "--template", "chatml", "--train-on-inputs"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "(format messages, template chatml, training on inputs)"));
  EXPECT_EQ(occurrences(r.out, "[["), 1u) << r.out;
  // The folder's tokenizer.json writes BOS out as "<s>"; each template piece is encoded on its own,
  // so the "▁" Metaspace puts before it shows as a space after BOS (tokenizers strips only the
  // very first one of a decode).
  EXPECT_TRUE(test::contains(r.out, "<s>[[ <|im_start|>user"));
  r = run_cli_captured({"data", "inspect", (dir / "chat.jsonl").string(), "--model", kStoriesModel, "--format", "text"});
  EXPECT_EQ(r.code, 1);  // a messages record read as text lacks "text": a bad record
  EXPECT_TRUE(test::contains(r.err, "chat.jsonl:1:"));
}

// A model folder whose tokenizer_config.json carries a Llama-2 chat template: Alpaca instructions
// become [INST] user turns unless --template says otherwise; a template of no known family is noted.
TEST(DataInspectCommand, ChatTemplateAutoDetectedFromTokenizerConfig) {
  test::TempDir dir;
  for (const char* f : {"config.json", "tokenizer.model"})
    std::filesystem::copy_file(std::filesystem::path(kStoriesModel) / f, dir / f);
  test::write_file(dir / "tokenizer_config.json",
                   R"({"chat_template": "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"})");
  const std::string model = dir.path().string(), alpaca = data("alpaca/alpaca_tiny.json");
  for (const char* tmpl : {"", "auto"}) {
    std::vector<std::string> args = {"data", "inspect", alpaca, "--model", model, "--examples", "1"};
    if (*tmpl) args.insert(args.end(), {"--template", tmpl});
    const auto r = run_cli_captured(args);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(test::contains(r.out, "(format alpaca, template llama2 auto-detected from the model's tokenizer_config.json)"));
    EXPECT_TRUE(test::contains(r.out, "<bos>[INST] Give three tips for staying healthy. [/INST][["));
  }
  auto r = run_cli_captured({"data", "inspect", alpaca, "--model", model, "--template", "alpaca", "--examples", "0"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "(format alpaca, template alpaca)"));
  // Text stays a plain continuation under a chat model.
  r = run_cli_captured({"data", "inspect", data("tinystories/tinystories_sample.txt"), "--model", model});
  EXPECT_TRUE(test::contains(r.out, "(format text, template plain)"));

  test::write_file(dir / "tokenizer_config.json", R"({"chat_template": "{{ '<start_of_turn>' }}"})");
  r = run_cli_captured({"data", "inspect", alpaca, "--model", model, "--examples", "0"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "(format alpaca, template alpaca)"));
  EXPECT_TRUE(test::contains(r.err, "note: tokenizer_config.json chat_template is of no family loft knows"));
  test::write_file(dir / "tokenizer_config.json", R"({"chat_template": 7})");
  r = run_cli_captured({"data", "inspect", alpaca, "--model", model});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "tokenizer_config.json: field chat_template must be"));
}

TEST(DataInspectCommand, BadRecordsFailWithFileAndLineOrAreSkipped) {
  test::TempDir dir;
  test::write_file(dir / "a.jsonl", "{\"text\": \"one\"}\n{\"text\": \"two\"\n{\"text\": \"three\"}\n");
  const std::string file = (dir / "a.jsonl").string();
  auto r = run_cli_captured({"data", "inspect", file, "--model", kStoriesModel});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "loft: error: " + file + ":2: "));
  EXPECT_EQ(occurrences(r.err, "\n"), 1u) << "one line: " << r.err;
  r = run_cli_captured({"data", "inspect", file, "--model", kStoriesModel, "--on-bad-record", "skip"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "examples       2\n"));
  EXPECT_TRUE(test::contains(r.out, "bad records    1 skipped (first: " + file + ":2: "));
}

TEST(DataInspectCommand, UsageErrorsExitTwoNamingTheOption) {
  const std::string file = data("alpaca/alpaca_tiny.json");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"data", "inspect", file}, "--model DIR or --tokenizer FILE"},
      {{"data", "inspect", file, "--model", kStoriesModel, "--tokenizer", data("tokenizers/llama2/tokenizer.model")},
       "exactly one"},
      {{"data", "inspect", file, "--model", "/nonexistent/model"}, "/nonexistent/model"},
      {{"data", "inspect", file, "--tokenizer", "/nonexistent/tok.model"}, "/nonexistent/tok.model"},
      {{"data", "inspect", file, "--model", kStoriesModel, "--format", "csv"}, "--format"},
      {{"data", "inspect", file, "--model", kStoriesModel, "--template", "vicuna"}, "--template"},
      {{"data", "inspect", file, "--model", kStoriesModel, "--seq", "1"}, "--seq"},
      {{"data", "inspect", file, "--model", kStoriesModel, "--examples", "-2"}, "--examples"},
      {{"data", "inspect", file, "--model", kStoriesModel, "--on-bad-record", "ignore"}, "--on-bad-record"},
      {{"data", "inspect", "/nonexistent/data.jsonl", "--model", kStoriesModel}, "/nonexistent/data.jsonl"},
      {{"data", "inspect", "--model", kStoriesModel}, "files"},
      {{"data"}, "inspect"},
  };
  for (const auto& [args, part] : cases) {
    const auto r = run_cli_captured(args);
    EXPECT_EQ(r.code, 2) << args.back() << ": " << r.err;
    EXPECT_TRUE(test::contains(r.err, part));
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(DataInspectCommand, HelpDocumentsTheMarkers) {
  const auto r = run_cli_captured({"data", "inspect", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(test::contains(r.out, "[[ and ]]"));
}

}  // namespace
}  // namespace loft
