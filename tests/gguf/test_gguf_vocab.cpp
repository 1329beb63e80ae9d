// Tokenizer metadata for the three paths convert_hf_to_gguf.py takes (SentencePiece model,
// SentencePiece-style tokenizer.json, byte-level tokenizer.json), written and read back.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "../common/test_util.h"
#include "export/gguf/gguf_reader.h"
#include "export/gguf/gguf_vocab.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace loft::gguf {
namespace {

namespace fs = std::filesystem;

fs::path stories_hf() { return test::data_path("models/stories260K-hf"); }

// A folder holding some of `src`'s files (symlinked) plus `config` as config.json.
void make_folder(const fs::path& dir, const fs::path& src, const std::vector<std::string>& files, const std::string& config) {
  for (const std::string& f : files) fs::create_symlink(src / f, dir / f);
  std::ofstream(dir / "config.json") << config;
}

// Writes `v` into a GGUF file and reads the tokenizer keys back into a Vocab.
Vocab round_trip(const Vocab& v, const fs::path& file) {
  Writer w(file);
  set_vocab_metadata(w, v);
  w.begin();
  w.finish();
  const File f = read_gguf(file);
  Vocab r;
  r.model = f.at("tokenizer.ggml.model").get_string("m");
  r.pre = f.at("tokenizer.ggml.pre").get_string("p");
  r.tokens = f.at("tokenizer.ggml.tokens").get_strings("t");
  if (const Value* s = f.find("tokenizer.ggml.scores")) r.scores = s->get_array<float>("s");
  r.token_types = f.at("tokenizer.ggml.token_type").get_array<int32_t>("tt");
  if (const Value* m = f.find("tokenizer.ggml.merges")) r.merges = m->get_strings("m");
  const auto id = [&](const char* key) -> std::optional<uint32_t> {
    const Value* x = f.find(key);
    return x ? std::optional<uint32_t>(x->get<uint32_t>(key)) : std::nullopt;
  };
  r.bos = id("tokenizer.ggml.bos_token_id");
  r.eos = id("tokenizer.ggml.eos_token_id");
  r.unk = id("tokenizer.ggml.unknown_token_id");
  r.pad = id("tokenizer.ggml.padding_token_id");
  if (const Value* b = f.find("tokenizer.ggml.add_bos_token")) r.add_bos = b->get<bool>("b");
  if (const Value* e = f.find("tokenizer.ggml.add_eos_token")) r.add_eos = e->get<bool>("e");
  if (const Value* c = f.find("tokenizer.chat_template")) r.chat_template = c->get_string("c");
  return r;
}

void expect_same(const Vocab& a, const Vocab& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.pre, b.pre);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.scores, b.scores);
  EXPECT_EQ(a.token_types, b.token_types);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.bos, b.bos);
  EXPECT_EQ(a.eos, b.eos);
  EXPECT_EQ(a.unk, b.unk);
  EXPECT_EQ(a.pad, b.pad);
  EXPECT_EQ(a.add_bos, b.add_bos);
  EXPECT_EQ(a.add_eos, b.add_eos);
  EXPECT_EQ(a.chat_template, b.chat_template);
}

TEST(GgufVocab, SentencePieceModelWithTokenizerJsonBeside) {
  const Vocab v = read_vocab(stories_hf(), 512);
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.pre, "default");
  ASSERT_EQ(v.tokens.size(), 512u);
  const SentencePieceTokenizer sp(stories_hf() / "tokenizer.model");
  for (int id = 0; id < 512; ++id) {
    EXPECT_EQ(v.tokens[size_t(id)], sp.processor().IdToPiece(id));
    EXPECT_EQ(v.scores[size_t(id)], sp.processor().GetScore(id));
  }
  EXPECT_EQ(v.token_types[0], kUnknown);
  EXPECT_EQ(v.token_types[1], kControl);
  EXPECT_EQ(v.token_types[2], kControl);
  EXPECT_EQ(v.tokens[3], "<0x00>");
  EXPECT_EQ(v.token_types[3], kByte);
  EXPECT_EQ(v.token_types[300], kNormal);
  EXPECT_EQ(v.bos, 1u);
  EXPECT_EQ(v.eos, 2u);
  EXPECT_EQ(v.unk, 0u);
  EXPECT_FALSE(v.pad);
  EXPECT_EQ(v.add_bos, true);  // tokenizer.json's post-processor prepends <s>
  EXPECT_FALSE(v.add_eos);
  EXPECT_TRUE(v.merges.empty());
  test::TempDir dir;
  expect_same(round_trip(v, dir / "v.gguf"), v);
}

TEST(GgufVocab, SentencePieceModelAlonePadsToTheConfigVocab) {
  test::TempDir dir;
  make_folder(dir.path(), stories_hf(), {"tokenizer.model"}, R"({"bos_token_id": 1, "eos_token_id": 2})");
  const Vocab v = read_vocab(dir.path(), 520);
  ASSERT_EQ(v.tokens.size(), 520u);
  EXPECT_EQ(v.tokens[515], "[PAD515]");
  EXPECT_EQ(v.token_types[515], kUnused);
  EXPECT_EQ(v.scores[515], -10000.0f);
  EXPECT_EQ(v.bos, 1u);
  EXPECT_EQ(v.eos, 2u);
  EXPECT_FALSE(v.unk);      // only config.json names special ids here
  EXPECT_FALSE(v.add_bos);  // left to llama.cpp's default
}

TEST(GgufVocab, AddedTokensDecoderOverridesSentencePiecePieces) {
  test::TempDir dir;
  make_folder(dir.path(), stories_hf(), {"tokenizer.model"}, "{}");
  std::ofstream(dir / "tokenizer_config.json") << R"({"added_tokens_decoder": {
      "0": {"content": "<unk>", "special": true},
      "300": {"content": "\u2581my\u2581word", "special": false},
      "301": {"content": "<|tool|>", "special": false}}})";
  const Vocab v = read_vocab(dir.path(), 512);
  EXPECT_EQ(v.token_types[0], kControl);  // convert marks <unk> control when the config says special
  EXPECT_EQ(v.scores[0], -1000.0f);
  EXPECT_EQ(v.tokens[300], " my word");   // user-defined: "▁" pre-normalized to a space
  EXPECT_EQ(v.token_types[300], kUserDefined);
  EXPECT_EQ(v.token_types[301], kControl);  // looks special
  EXPECT_FALSE(v.bos);
}

TEST(GgufVocab, SentencePieceStyleTokenizerJson) {
  test::TempDir dir;
  make_folder(dir.path(), stories_hf(), {"tokenizer.json", "tokenizer_config.json"}, R"({"bos_token_id": 1, "eos_token_id": 2})");
  const Vocab v = read_vocab(dir.path(), 512);
  const Vocab sp = read_vocab(stories_hf(), 512);
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.tokens, sp.tokens);  // the same vocabulary, from the other file
  for (float s : v.scores) EXPECT_EQ(s, -1000.0f);
  EXPECT_EQ(v.token_types[0], kControl);  // LlamaHfVocab: special ids are control, <unk> included
  EXPECT_EQ(v.token_types[1], kControl);
  EXPECT_EQ(v.token_types[3], kByte);
  EXPECT_EQ(v.token_types[300], kNormal);
  EXPECT_EQ(v.bos, 1u);
  EXPECT_EQ(v.eos, 2u);
  EXPECT_EQ(v.unk, 0u);
  EXPECT_EQ(v.add_bos, true);
}

TEST(GgufVocab, Llama3ByteLevelIsGpt2WithMerges) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  const fs::path src = test::data_path("tokenizers/llama3");
  test::TempDir dir;
  make_folder(dir.path(), src, {"tokenizer.json", "tokenizer_config.json"}, R"({"bos_token_id": 128000, "eos_token_id": 128001})");
  const Vocab v = read_vocab(dir.path(), 128256);
  EXPECT_EQ(v.model, "gpt2");
  // llama.cpp's fingerprint, from loft's encoding of its probe text: this tokenizer.json adds no
  // BOS, which convert_hf_to_gguf.py knows as Smaug-Llama-3's "smaug-bpe".
  EXPECT_EQ(v.pre, "smaug-bpe");
  ASSERT_EQ(v.tokens.size(), 128256u);
  EXPECT_TRUE(v.scores.empty());
  EXPECT_EQ(v.tokens[128000], "<|begin_of_text|>");
  EXPECT_EQ(v.token_types[128000], kControl);
  EXPECT_EQ(v.tokens[220], "\xC4\xA0");  // "Ġ": a space, byte-level encoded
  EXPECT_EQ(v.token_types[220], kNormal);
  ASSERT_EQ(v.merges.size(), 280147u);
  EXPECT_EQ(v.merges[0], "\xC4\xA0 \xC4\xA0");
  EXPECT_EQ(v.merges[1], "\xC4\xA0 \xC4\xA0\xC4\xA0\xC4\xA0");
  EXPECT_EQ(v.bos, 128000u);
  EXPECT_EQ(v.eos, 128001u);
  EXPECT_FALSE(v.add_bos);  // no TemplateProcessing and no add_bos_token: llama.cpp's default applies
  std::ifstream in(src / "tokenizer_config.json");
  EXPECT_EQ(v.chat_template, nlohmann::json::parse(in)["chat_template"].get<std::string>());
  expect_same(round_trip(v, dir / "v.gguf"), v);
}

TEST(GgufVocab, Llama3WithBosIsLlamaBpe) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  const fs::path src = test::data_path("tokenizers/llama3");
  test::TempDir dir;
  make_folder(dir.path(), src, {"tokenizer.json"}, R"({"bos_token_id": 128000, "eos_token_id": 128001})");
  std::ifstream in(src / "tokenizer_config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["add_bos_token"] = true;  // transformers then prepends <|begin_of_text|>, as Meta-Llama-3 does
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
  const Vocab v = read_vocab(dir.path(), 128256);
  EXPECT_EQ(v.pre, "llama-bpe");
  EXPECT_EQ(v.add_bos, true);
}

TEST(GgufVocab, QwenByteLevelIsQwen2) {
  LOFT_REQUIRE_DATA("tokenizers/qwen3");
  const fs::path src = test::data_path("tokenizers/qwen3");
  test::TempDir dir;
  make_folder(dir.path(), src, {"tokenizer.json", "tokenizer_config.json"},
              R"({"bos_token_id": 151643, "eos_token_id": 151645})");
  const Vocab v = read_vocab(dir.path(), 151936);  // Qwen3-8B's vocab_size: 268 rows past the tokenizer
  EXPECT_EQ(v.model, "gpt2");
  // llama.cpp's fingerprint of Qwen's tokenizer (recorded from Qwen1.5-7B's), from loft's encoding of
  // its probe text with Qwen 3's tokenizer.json: the same vocabulary, merges and split.
  EXPECT_EQ(v.pre, "qwen2");
  ASSERT_EQ(v.tokens.size(), 151936u);
  EXPECT_EQ(v.tokens[151643], "<|endoftext|>");
  EXPECT_EQ(v.token_types[151644], kControl);  // <|im_start|>
  EXPECT_EQ(v.tokens[151668], "</think>");
  EXPECT_EQ(v.tokens[151935], "[PAD151935]");
  EXPECT_EQ(v.token_types[151935], kUnused);
  EXPECT_EQ(v.merges.size(), 151387u);
  EXPECT_EQ(v.eos, 151645u);  // tokenizer_config.json's eos_token <|im_end|> comes before config.json's
  EXPECT_EQ(v.bos, 151643u);
  EXPECT_EQ(v.pad, 151643u);
  EXPECT_EQ(v.add_bos, false);
  expect_same(round_trip(v, dir / "v.gguf"), v);
}

TEST(GgufVocab, MissingTokenizerIsAClearError) {
  test::TempDir dir;
  try {
    read_vocab(dir.path(), 10);
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "has no tokenizer"));
  }
}

}  // namespace
}  // namespace loft::gguf
