// The shared test models' tokenizer.json (SentencePiece-style BPE: Metaspace prepend_scheme
// first, byte_fallback, BOS by TemplateProcessing) against the token ids lm-eval fed the models
// (the test data's reference/eval), and against the SentencePiece library on the 12 reference strings.
#include <gtest/gtest.h>

#include "tests/common/test_util.h"
#include "tests/tokenizer/bpe_test_util.h"
#include "tokenizer/tokenizer.h"

namespace loft {
namespace {

class TestModelTokenizer : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    LOFT_REQUIRE_DATA("models/" + GetParam());
    tok_ = load_tokenizer(test::data_path("models/" + GetParam()));
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_P(TestModelTokenizer, LoadsTheTokenizerJson) {
  EXPECT_EQ(tok_->kind(), "bpe sentencepiece-style");
  EXPECT_EQ(tok_->vocab_size(), 512);
  EXPECT_EQ(tok_->bos_id(), 1);
  EXPECT_EQ(tok_->eos_id(), 2);
  EXPECT_EQ(tok_->unk_id(), 0);
  EXPECT_TRUE(tok_->adds_bos());
  EXPECT_FALSE(tok_->adds_eos());
  EXPECT_EQ(tok_->encode("Once upon a time"), (std::vector<int32_t>{403, 407, 261, 378}));
  EXPECT_EQ(tok_->encode_with_special("Once upon a time"), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  // tokenizers writes special tokens out and strips one leading space of the whole text.
  EXPECT_EQ(tok_->decode({1, 403, 407, 261, 378, 2}), "<s> Once upon a time</s>");
  EXPECT_EQ(tok_->decode_skip_special({1, 403, 407, 261, 378, 2}), "Once upon a time");
  EXPECT_EQ(tok_->decode({403, 407}), "Once upon");
}

// lm-eval's context_enc for 40 MMLU 5-shot prompts, and the continuation ids taken from the joint
// encoding (whole[len(ctx_enc):]).
TEST_P(TestModelTokenizer, MmluContextsMatchLmEval) {
  const auto requests = test::read_jsonl(test::data_path("reference/eval/mmlu5_requests.jsonl"));
  const auto tokens = test::read_jsonl(test::data_path("reference/eval/" + GetParam() + "-mmlu5_tokens.jsonl"));
  ASSERT_EQ(requests.size(), 40u);
  size_t checked = 0;
  for (const auto& req : requests) {
    const auto it = std::find_if(tokens.begin(), tokens.end(), [&](const nlohmann::json& t) {
      return t["subject"] == req["subject"] && t["index"] == req["index"];
    });
    ASSERT_NE(it, tokens.end()) << req["subject"] << " " << req["index"];
    const std::string ctx = req["context"];
    SCOPED_TRACE(req["subject"].get<std::string>() + " " + req["index"].dump());
    const auto ctx_enc = tok_->encode_with_special(ctx);
    EXPECT_EQ(ctx_enc, (*it)["context_enc"].get<std::vector<int32_t>>());
    const auto conts = req["continuations"].get<std::vector<std::string>>();
    const auto cont_enc = (*it)["continuation_enc"].get<std::vector<std::vector<int32_t>>>();
    ASSERT_EQ(conts.size(), cont_enc.size());
    for (size_t i = 0; i < conts.size(); ++i) {
      const auto whole = tok_->encode_with_special(ctx + conts[i]);
      ASSERT_GE(whole.size(), ctx_enc.size());
      EXPECT_EQ(std::vector<int32_t>(whole.begin() + long(ctx_enc.size()), whole.end()), cont_enc[i]);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 40u);
}

// GSM8K: the generation input is the context's encoding, left-truncated (n_truncated ids dropped).
TEST_P(TestModelTokenizer, Gsm8kContextsMatchLmEval) {
  const auto requests = test::read_jsonl(test::data_path("reference/eval/gsm8k5_requests.jsonl"));
  const auto tokens = test::read_jsonl(test::data_path("reference/eval/" + GetParam() + "-gsm8k5_tokens.jsonl"));
  ASSERT_EQ(requests.size(), 8u);
  for (const auto& req : requests) {
    const auto it = std::find_if(tokens.begin(), tokens.end(), [&](const nlohmann::json& t) { return t["index"] == req["index"]; });
    ASSERT_NE(it, tokens.end());
    SCOPED_TRACE("gsm8k " + req["index"].dump());
    const auto full = tok_->encode_with_special(req["context"].get<std::string>());
    const auto input = (*it)["input_ids"].get<std::vector<int32_t>>();
    const size_t dropped = (*it)["n_truncated"].get<size_t>();
    ASSERT_EQ(full.size(), dropped + input.size());
    EXPECT_EQ(std::vector<int32_t>(full.begin() + long(dropped), full.end()), input);
  }
}

INSTANTIATE_TEST_SUITE_P(SharedModels, TestModelTokenizer, ::testing::Values("stories260K-hf", "wide-random"));

// The same vocabulary through tokenizer.json and through SentencePiece (tok512): they agree except
// where SentencePiece's remove_extra_whitespaces collapses a run of spaces, which the HF BPE keeps
// ("▁▁" + "It" where SentencePiece gives "▁It"; docs/evaluation.md point 14).
TEST(BpeVersusSentencePiece, AgreeOnTheReferenceStringsExceptSpaceRuns) {
  const auto ref = test::read_json(test::data_path("reference/tokenizer_reference_encodings.json"));
  const auto& spec = ref["tokenizers"]["tok512_stories260K"];
  const auto bpe = load_tokenizer(test::data_path("models/stories260K-hf"));
  const auto sp = load_sentencepiece(test::data_path(spec["model_file"].get<std::string>()));
  ASSERT_EQ(spec["cases"].size(), 12u);
  std::vector<std::string> differ;
  for (const auto& c : spec["cases"]) {
    const std::string text = c["text"];
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(sp->encode(text), ids);
    const bool space_run = text.find("  ") != std::string::npos;
    if (bpe->encode(text) != ids) differ.push_back(text);
    else EXPECT_EQ(bpe->decode(ids), sp->decode(ids)) << text;
    EXPECT_EQ(bpe->encode(text) != ids, space_run) << nlohmann::json(text).dump();
  }
  // " leading space" agrees: Metaspace keeps the text's own "▁" and adds none, SentencePiece
  // drops the leading space and adds its dummy prefix.
  EXPECT_EQ(differ, (std::vector<std::string>{"  two leading spaces"}));
}

// Small tokenizer.json files exercising the pipeline options one by one, against tokenizers 0.23.2
// (data/bpe_pipeline_reference.json): Metaspace schemes, legacy Prepend+Replace normalizers, unk
// and fuse_unk, every Split behaviour (inverted too), ignore_merges, added-token flags
// (lstrip/rstrip/single_word/normalized), subword prefix/suffix, decoder chains.
TEST(BpePipeline, VariantsMatchTokenizers) {
  const auto ref = test::read_json(test::tokenizer_test_data("bpe_pipeline_reference.json"));
  ASSERT_GE(ref["variants"].size(), 20u);
  for (const auto& [name, v] : ref["variants"].items()) {
    SCOPED_TRACE("variant " + name);
    test::TempDir dir;
    nlohmann::json tj = v["tokenizer"];
    if (!tj["model"].contains("vocab")) {
      tj["model"]["vocab"] = ref["base_vocab"];
      tj["model"]["merges"] = ref["base_merges"];
    }
    test::write_text(dir / "tokenizer.json", tj.dump());
    const auto tok = load_tokenizer(dir.path());
    for (const auto& c : v["cases"]) {
      const std::string text = c["text"];
      SCOPED_TRACE("text: " + nlohmann::json(text).dump());
      const auto ids = c["ids"].get<std::vector<int32_t>>();
      EXPECT_EQ(tok->encode(text), ids);
      EXPECT_EQ(tok->decode(ids), c["decoded"].get<std::string>());
      EXPECT_EQ(tok->decode_skip_special(ids), c["decoded_skip"].get<std::string>());
      EXPECT_EQ(test::stream_all(*tok, ids), c["decoded"].get<std::string>());
    }
  }
}

}  // namespace
}  // namespace loft
