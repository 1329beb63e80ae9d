// The Llama 3 tokenizer.json (byte-level BPE) against Hugging Face: the 40 strings of
// tests/data/reference/llama3_tokenizer_reference.json (tokenizers 0.23 ids, transformers'
// default ids, decode) and 41 harder strings made with tokenizers 0.23.2 (data/), plus BOS/EOS
// as transformers derives them from tokenizer_config.json.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/common/test_util.h"
#include "tests/tokenizer/bpe_test_util.h"
#include "tokenizer/tokenizer.h"

namespace loft {
namespace {

using ::testing::HasSubstr;

std::filesystem::path llama3_dir() { return test::data_path("tokenizers/llama3"); }

const Tokenizer& llama3() {
  static const std::unique_ptr<Tokenizer> tok = load_tokenizer(llama3_dir());
  return *tok;
}

// One reference case: ids of the text, decode (and skip-special decode when given), streaming.
void expect_case(const Tokenizer& tok, const nlohmann::json& c) {
  const auto ids = c["ids"].get<std::vector<int32_t>>();
  EXPECT_EQ(tok.encode(c["text"].get<std::string>()), ids);
  EXPECT_EQ(tok.decode(ids), c["decoded"].get<std::string>());
  if (c.contains("decoded_skip")) EXPECT_EQ(tok.decode_skip_special(ids), c["decoded_skip"].get<std::string>());
  EXPECT_EQ(test::stream_all(tok, ids), c["decoded"].get<std::string>());
}

TEST(BpeLlama3, ReferenceStringsEncodeAndDecodeAsHuggingFace) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  const auto ref = test::read_json(test::data_path("reference/llama3_tokenizer_reference.json"));
  const Tokenizer& tok = llama3();
  ASSERT_EQ(ref["cases"].size(), 40u);
  for (const auto& c : ref["cases"]) {
    SCOPED_TRACE("text: " + c["text"].dump());
    expect_case(tok, c);
    EXPECT_EQ(tok.encode_with_special(c["text"].get<std::string>()), c["ids_hf_default"].get<std::vector<int32_t>>());
  }
}

TEST(BpeLlama3, HarderStringsMatchTokenizers) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  const auto ref = test::read_json(test::tokenizer_test_data("llama3_extra_reference.json"));
  const Tokenizer& tok = llama3();
  ASSERT_GE(ref["cases"].size(), 40u);
  for (const auto& c : ref["cases"]) {
    SCOPED_TRACE("text: " + c["text"].dump());
    expect_case(tok, c);
  }
}

TEST(BpeLlama3, SpecialTokensAndIds) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  const Tokenizer& tok = llama3();
  EXPECT_EQ(tok.kind(), "bpe byte-level");
  EXPECT_EQ(tok.vocab_size(), 128256);
  EXPECT_EQ(tok.bos_id(), 128000);
  EXPECT_EQ(tok.eos_id(), 128001);
  EXPECT_FALSE(tok.adds_bos());  // this release's post-processor is ByteLevel only
  EXPECT_FALSE(tok.adds_eos());
  EXPECT_EQ(tok.unk_id(), -1);
  EXPECT_EQ(tok.special_id("<|eot_id|>"), 128009);
  EXPECT_EQ(tok.special_id("<|start_header_id|>"), 128006);
  EXPECT_EQ(tok.special_id("Hello"), -1);
  const auto added = tok.added_tokens();
  ASSERT_EQ(added.size(), 256u);
  EXPECT_EQ(added.front().id, 128000);
  EXPECT_EQ(added.front().content, "<|begin_of_text|>");
  EXPECT_TRUE(added.front().special);
  EXPECT_EQ(tok.encode("user<|eot_id|>"), (std::vector<int32_t>{882, 128009}));
  EXPECT_EQ(tok.piece(128009), "<|eot_id|>");
  EXPECT_EQ(tok.piece(220), " ");
  EXPECT_EQ(tok.piece(9468), "\xF0\x9F");  // the first two bytes of an emoji
}

TEST(BpeLlama3, InvalidUtf8NamesTheByteOffset) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  for (const auto& [text, offset] : std::vector<std::pair<std::string, size_t>>{
           {"abc\xFF", 3}, {"ok \xC3(", 3}, {"\xED\xA0\x80 surrogate", 0}, {"x\xF0\x9F\x98", 1}}) {
    try {
      llama3().encode(text);
      ADD_FAILURE() << "no error for text with an invalid byte at " << offset;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("not valid UTF-8"));
      EXPECT_THAT(e.what(), HasSubstr("byte offset " + std::to_string(offset)));
    }
  }
}

TEST(BpeLlama3, OutOfRangeIdsAreNamed) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  EXPECT_THROW(llama3().decode({1, 128256}), Error);
  EXPECT_THROW(llama3().piece(-1), Error);
  EXPECT_THROW(llama3().stream_decoder()->push(200000), Error);
}

// transformers 5 rebuilds the post-processor from add_bos_token/add_eos_token when the config
// sets either; the instruct config changes EOS to <|eot_id|>.
TEST(BpeLlama3, TokenizerConfigDecidesBosAndEos) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  namespace fs = std::filesystem;
  test::TempDir dir;
  fs::create_symlink(llama3_dir() / "tokenizer.json", dir / "tokenizer.json");
  auto config = test::read_json(llama3_dir() / "tokenizer_config.json");
  config["add_bos_token"] = true;
  test::write_text(dir / "tokenizer_config.json", config.dump());
  auto tok = load_tokenizer(dir.path());
  EXPECT_TRUE(tok->adds_bos());
  EXPECT_EQ(tok->encode_with_special("Hello world"), (std::vector<int32_t>{128000, 9906, 1917}));

  config["add_eos_token"] = true;
  config["add_bos_token"] = false;
  test::write_text(dir / "tokenizer_config.json", config.dump());
  tok = load_tokenizer(dir.path());
  EXPECT_EQ(tok->encode_with_special("Hello world"), (std::vector<int32_t>{9906, 1917, 128001}));

  fs::remove(dir / "tokenizer_config.json");
  fs::copy_file(llama3_dir() / "tokenizer_config.instruct.json", dir / "tokenizer_config.json");
  tok = load_tokenizer(dir.path());
  EXPECT_EQ(tok->eos_id(), 128009);
  EXPECT_FALSE(tok->adds_bos());
}

// Llama 3.1's tokenizer.json adds BOS in its post-processor (Sequence of ByteLevel and
// TemplateProcessing); without add_bos_token in the config, that decides.
TEST(BpeLlama3, TemplateProcessingInASequenceAddsBos) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  test::TempDir dir;
  auto tj = test::read_json(llama3_dir() / "tokenizer.json");
  tj["post_processor"] = nlohmann::json::parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
       "pair": [],
       "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000], "tokens": ["<|begin_of_text|>"]}}}]})");
  test::write_text(dir / "tokenizer.json", tj.dump());
  std::filesystem::copy_file(llama3_dir() / "tokenizer_config.json", dir / "tokenizer_config.json");
  const auto tok = load_tokenizer(dir.path());
  EXPECT_TRUE(tok->adds_bos());
  EXPECT_EQ(tok->encode_with_special("Hello world"), (std::vector<int32_t>{128000, 9906, 1917}));
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<int32_t>{9906, 1917}));
}

}  // namespace
}  // namespace loft
