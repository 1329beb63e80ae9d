// `loft tokenize` through the real CLI: a folder holding only tokenizer files, text from --text or
// stdin, ids out (space-separated), --add-special, --decode, streaming --jsonl, and exit codes. The
// Llama 3 cases run once the build loads tokenizer.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"
#include "tokenizer/tokenizer.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using test::CliResult;

// std::cin reads `text` while this lives.
class StdinFrom {
 public:
  explicit StdinFrom(const std::string& text) : in_(text), old_(std::cin.rdbuf(in_.rdbuf())) {}
  ~StdinFrom() { std::cin.rdbuf(old_); }

 private:
  std::istringstream in_;
  std::streambuf* old_;
};

CliResult run(std::vector<std::string> args, const std::string& stdin_text = "") {
  StdinFrom in(stdin_text);
  return test::run_cli_captured(std::move(args));
}

std::string ids_line(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s + "\n";
}

// A folder with nothing but stories260K's SentencePiece tokenizer.model.
class TokenizeSentencePiece : public testing::Test {
 protected:
  void SetUp() override {
    fs::copy_file(test::data_path("models/stories260K-hf/tokenizer.model"), dir_ / "tokenizer.model");
    tok_ = load_tokenizer(dir_.path());
  }
  std::string model() const { return dir_.path().string(); }
  test::TempDir dir_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(TokenizeSentencePiece, EncodesTextOrStdinAsOneInput) {
  const std::string text = "Once upon a time, a cat.\nThe end.";
  auto r = run({"tokenize", "--model", model(), "--text", text});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, ids_line(tok_->encode(text)));
  r = run({"tokenize", "--model", model()}, text);  // the whole of stdin, newline included
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, ids_line(tok_->encode(text)));
  r = run({"tokenize", "--model", model(), "--text", text, "--add-special"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, ids_line(tok_->encode_with_special(text)));
  EXPECT_EQ(tok_->encode_with_special(text).front() == tok_->bos_id(), tok_->adds_bos());
  EXPECT_EQ(run({"tokenize", "--model", model(), "--text", ""}).out, "\n");
}

TEST_F(TokenizeSentencePiece, DecodesIdsBack) {
  const std::string text = "Once upon a time, a cat.";
  const std::string ids = ids_line(tok_->encode(text));
  auto r = run({"tokenize", "--model", model(), "--decode"}, ids);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, text) << "the text exactly, no newline added";
  r = run({"tokenize", "--model", model(), "--decode", "--text", "[" + std::to_string(tok_->bos_id()) + ", 300,301]"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, tok_->decode({tok_->bos_id(), 300, 301}));
}

TEST_F(TokenizeSentencePiece, JsonlStreamsLineByLine) {
  auto r = run({"tokenize", "--model", model(), "--jsonl"},
               "{\"text\": \"Hello there\"}\n{\"text\": \"\", \"id\": 7}\r\n{\"text\": \"caf\\u00e9\"}");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream out(r.out);
  std::vector<std::string> texts = {"Hello there", "", "café"};
  std::string line;
  for (const std::string& t : texts) {
    ASSERT_TRUE(std::getline(out, line));
    EXPECT_EQ(nlohmann::json::parse(line), (nlohmann::json{{"ids", tok_->encode(t)}})) << t;
  }
  EXPECT_FALSE(std::getline(out, line));

  // And back: {"ids": [...]} -> {"text": ...}, one line each.
  r = run({"tokenize", "--model", model(), "--jsonl", "--decode"},
          nlohmann::json{{"ids", tok_->encode("Hello there")}}.dump() + "\n{\"ids\": []}\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"text\":\"Hello there\"}\n{\"text\":\"\"}\n");
}

TEST_F(TokenizeSentencePiece, BadInputLinesNameTheLine) {
  auto r = run({"tokenize", "--model", model(), "--jsonl"}, "{\"text\": \"a\"}\n{\"txt\": \"b\"}\n{\"text\": \"c\"}\n");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "stdin:2: expected a JSON object with \"text\""));
  EXPECT_EQ(r.out, (nlohmann::json{{"ids", tok_->encode("a")}}.dump() + "\n")) << "line 1 was already written";
  r = run({"tokenize", "--model", model(), "--jsonl"}, "{\"text\": 5}\n");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "stdin:1: \"text\" must be a string"));
  r = run({"tokenize", "--model", model(), "--jsonl"}, "\n");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "stdin:1: not valid JSON"));
  r = run({"tokenize", "--model", model(), "--jsonl", "--decode"}, "{\"ids\": [1]}\n{\"ids\": [1, \"x\"]}\n");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "stdin:2: \"ids\" must be a list of token ids"));
  r = run({"tokenize", "--model", model(), "--jsonl", "--decode"}, "{\"ids\": [99999]}\n");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "stdin:1: "));
  EXPECT_TRUE(test::contains(r.err, "99999"));
  r = run({"tokenize", "--model", model(), "--decode"}, "1 2 three");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "stdin: 'three' is not a token id"));
  r = run({"tokenize", "--model", model()}, std::string("bad \xff byte"));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
}

TEST_F(TokenizeSentencePiece, UsageErrorsExit2) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"tokenize"}, {"tokenize", "--model", model(), "--jsonl", "--text", "x"},
        {"tokenize", "--model", model(), "--decode", "--add-special"},
        {"tokenize", "--model", "/definitely/not/here", "--text", "x"},
        {"tokenize", "--model", model(), "--decode", "--text", "1 x"}, {"tokenize", "--model", model(), "--bogus"}}) {
    const CliResult r = run(args);
    EXPECT_EQ(r.code, 2) << args.back() << ": " << r.err;
    EXPECT_TRUE(r.out.empty());
  }
  // A folder without any tokenizer: a runtime error naming it.
  test::TempDir empty;
  const CliResult r = run({"tokenize", "--model", empty.path().string(), "--text", "x"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, empty.path().string()));
}

// Llama 3's tokenizer.json in a folder of tokenizer files only; ids as Hugging Face gives them
// (tests/data/reference/llama3_tokenizer_reference.json).
TEST(TokenizeLlama3, SpecialTokensInTextAndReferenceIds) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  test::TempDir dir;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(test::data_path("tokenizers/llama3") / f, dir / f);
  const std::string model = dir.path().string();
  auto r = run({"tokenize", "--model", model, "--text", "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "128006 882 128007 271 13347 128009\n");
  r = run({"tokenize", "--model", model, "--text", "Hello  world"});
  EXPECT_EQ(r.out, "9906 220 1917\n");
  r = run({"tokenize", "--model", model, "--decode", "--text", "128000 9906"});
  EXPECT_EQ(r.out, "<|begin_of_text|>Hello");
  r = run({"tokenize", "--model", model, "--jsonl"}, "{\"text\": \"Hello  world\"}\n");
  EXPECT_EQ(r.out, "{\"ids\":[9906,220,1917]}\n");
}

}  // namespace
}  // namespace loft
