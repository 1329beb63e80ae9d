// Bad tokenizer.json files: each is one clear loft::Error naming the file and what is wrong or
// unsupported, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/common/test_util.h"
#include "tests/tokenizer/bpe_test_util.h"
#include "tokenizer/tokenizer.h"

namespace loft {
namespace {

using ::testing::HasSubstr;

// A small valid byte-level tokenizer.json to break one piece at a time.
nlohmann::json valid() {
  return nlohmann::json::parse(R"({
    "version": "1.0",
    "added_tokens": [{"id": 5, "content": "<|end|>", "special": true, "single_word": false,
                      "lstrip": false, "rstrip": false, "normalized": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\s+|\\p{L}+"}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
    "post_processor": null,
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "fuse_unk": false, "byte_fallback": false,
              "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġa": 4}, "merges": ["a b", ["Ġ", "a"]]}
  })");
}

// The error of loading a folder whose tokenizer.json holds `text` (one line, naming the file).
std::string load_error_text(const std::string& text) {
  test::TempDir dir;
  test::write_text(dir / "tokenizer.json", text);
  try {
    load_tokenizer(dir.path());
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_THAT(msg, HasSubstr((dir / "tokenizer.json").string()));
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  }
  ADD_FAILURE() << "no error for " << text.substr(0, 300);
  return "";
}

std::string load_error(const nlohmann::json& tj) { return load_error_text(tj.dump()); }

TEST(BpeErrors, TheValidBaseLoads) {
  test::TempDir dir;
  test::write_text(dir / "tokenizer.json", valid().dump());
  const auto tok = load_tokenizer(dir.path());
  EXPECT_EQ(tok->encode("ab a<|end|>"), (std::vector<int32_t>{2, 3, 0, 5}));  // the Split isolates " "
  EXPECT_EQ(tok->decode({2, 4, 5}), "ab a<|end|>");
}

TEST(BpeErrors, MissingAndNotJson) {
  EXPECT_THAT(load_error_text("{\"model\": "), HasSubstr("not valid JSON"));
  test::TempDir dir;
  std::filesystem::create_directory(dir / "tokenizer.json");
  try {
    load_tokenizer(dir.path());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("is not a regular file"));
  }
}

TEST(BpeErrors, ModelType) {
  auto tj = valid();
  tj["model"].erase("type");
  EXPECT_THAT(load_error(tj), HasSubstr("has no \"type\""));
  tj["model"]["type"] = "Unigram";
  EXPECT_THAT(load_error(tj), HasSubstr("unsupported model type 'Unigram'"));
  tj.erase("model");
  EXPECT_THAT(load_error(tj), HasSubstr("model: missing"));
  tj = valid();
  tj["model"]["dropout"] = 0.1;
  EXPECT_THAT(load_error(tj), HasSubstr("dropout"));
}

// The id -> token table is sized by the largest id: an id of 2^31 - 1 (found by
// fuzz_tokenizer_json) asked for 13 GB; ids are bounded as config.json's vocab_size is.
TEST(BpeErrors, VocabIdsAreBounded) {
  auto tj = valid();
  tj["model"]["vocab"]["zz"] = 2147483647;
  EXPECT_THAT(load_error(tj), HasSubstr("vocab id of 'zz' is not an id from 0 to 16777215"));
}

TEST(BpeErrors, MergesNamingUnknownTokens) {
  auto tj = valid();
  tj["model"]["merges"] = {"a c"};
  EXPECT_THAT(load_error(tj), HasSubstr("names token 'c', which is not in model.vocab"));
  tj["model"]["merges"] = {"b a"};
  EXPECT_THAT(load_error(tj), HasSubstr("makes 'ba', which is not in model.vocab"));
  tj["model"]["merges"] = {"a b c"};
  EXPECT_THAT(load_error(tj), HasSubstr("not two tokens"));
  tj["model"]["merges"] = {42};
  EXPECT_THAT(load_error(tj), HasSubstr("merge 0 must be"));
  tj = valid();
  tj["model"]["unk_token"] = "<unk>";
  EXPECT_THAT(load_error(tj), HasSubstr("unk_token '<unk>' is not in model.vocab"));
}

TEST(BpeErrors, MalformedUtf8InAVocabKey) {
  std::string text = valid().dump();
  const size_t at = text.find("\"ab\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 4, "\"a\xFF\"");
  EXPECT_THAT(load_error_text(text), HasSubstr("UTF-8"));
  // An escaped lone surrogate cannot be a token either.
  text = valid().dump();
  text.replace(text.find("\"ab\""), 4, "\"\\ud800\"");
  EXPECT_THAT(load_error_text(text), HasSubstr("not valid JSON"));
}

TEST(BpeErrors, AddedTokenIds) {
  auto tj = valid();
  tj["added_tokens"][0]["id"] = 9;  // tokenizers would give it 5
  EXPECT_THAT(load_error(tj), HasSubstr("has id 9, but tokenizers gives it id 5"));
  tj = valid();
  tj["added_tokens"].push_back(tj["added_tokens"][0]);
  tj["added_tokens"][1]["content"] = "<|other|>";  // a duplicate id
  EXPECT_THAT(load_error(tj), HasSubstr("'<|other|>' has id 5, but tokenizers gives it id 6"));
  tj = valid();
  tj["added_tokens"][0]["id"] = -1;
  EXPECT_THAT(load_error(tj), HasSubstr("field added_tokens[0].id must be an integer from 0 to 2147483647"));
  tj = valid();
  tj["added_tokens"][0]["content"] = "ab";  // in the vocabulary: must keep its id there
  EXPECT_THAT(load_error(tj), HasSubstr("'ab' has id 5, but tokenizers gives it id 2"));
}

TEST(BpeErrors, UnsupportedComponentsAreNamed) {
  auto tj = valid();
  tj["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_THAT(load_error(tj), HasSubstr("unsupported pre-tokenizer type 'Whitespace'"));
  tj = valid();
  tj["pre_tokenizer"]["pretokenizers"][1] = {{"type", "Digits"}, {"individual_digits", true}};
  EXPECT_THAT(load_error(tj), HasSubstr("pre_tokenizer.pretokenizers[1]: unsupported pre-tokenizer type 'Digits'"));
  tj = valid();
  tj["decoder"] = {{"type", "WordPiece"}};
  EXPECT_THAT(load_error(tj), HasSubstr("unsupported decoder type 'WordPiece'"));
  tj = valid();
  tj["normalizer"] = {{"type", "NFKC"}};
  EXPECT_THAT(load_error(tj), HasSubstr("unsupported normalizer type 'NFKC'"));
  tj = valid();
  tj["post_processor"] = {{"type", "BertProcessing"}};
  EXPECT_THAT(load_error(tj), HasSubstr("unsupported post-processor type 'BertProcessing'"));
  tj = valid();
  tj["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
  EXPECT_THAT(load_error(tj), HasSubstr("unknown Split behavior 'Sideways'"));
}

TEST(BpeErrors, InvalidRegexIsNamed) {
  auto tj = valid();
  tj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(\\p{L}+";
  const std::string msg = load_error(tj);
  EXPECT_THAT(msg, HasSubstr("pre_tokenizer.pretokenizers[0]"));
  EXPECT_THAT(msg, HasSubstr("invalid regex '(\\p{L}+'"));
  EXPECT_THAT(msg, HasSubstr("at offset"));
}

TEST(BpeErrors, UnsupportedPostProcessorTemplates) {
  auto tj = valid();
  tj["post_processor"] = nlohmann::json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<|end|>", "type_id": 0}}, {"SpecialToken": {"id": "<|end|>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}}],
      "special_tokens": {"<|end|>": {"id": "<|end|>", "ids": [5], "tokens": ["<|end|>"]}}})");
  EXPECT_THAT(load_error(tj), HasSubstr("more than one token"));
  tj["post_processor"]["single"][1] = {{"SpecialToken", {{"id", "<|nope|>"}, {"type_id", 0}}}};
  EXPECT_THAT(load_error(tj), HasSubstr("'<|nope|>' is not in special_tokens"));
}

}  // namespace
}  // namespace loft
