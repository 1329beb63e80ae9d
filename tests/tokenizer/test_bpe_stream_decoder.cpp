// StreamDecoder of tokenizer.json tokenizers against their own decode(): random id sequences rich
// in the hard cases (UTF-8 characters split across byte-level tokens, byte-fallback runs valid and
// invalid, special tokens, leading "▁"), pushed one id at a time, byte for byte.
#include <gtest/gtest.h>

#include <random>

#include "tests/common/test_util.h"
#include "tests/tokenizer/bpe_test_util.h"
#include "tokenizer/tokenizer.h"

namespace loft {
namespace {

void expect_stream_matches_decode(const Tokenizer& tok, const std::vector<int32_t>& pool, int trials, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> any(0, tok.vocab_size() - 1), len(0, 24), pick(0, 99);
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<int32_t> ids;
    const int n = len(rng);
    for (int i = 0; i < n; ++i)
      ids.push_back(pick(rng) < 80 ? pool[size_t(pick(rng)) % pool.size()] : any(rng));
    ASSERT_EQ(test::stream_all(tok, ids), tok.decode(ids)) << "trial " << trial;
  }
}

TEST(BpeStreamDecoder, Llama3RandomSequencesMatchDecode) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  const auto tok = load_tokenizer(test::data_path("tokenizers/llama3"));
  // Byte-level pieces of multi-byte characters, plus words, spaces and special tokens.
  std::vector<int32_t> pool = tok->encode("emoji 😀👍🏽 東京 ÿ naïve  \n\n x");
  for (int32_t id : {128000, 128001, 128009, 9468, 239, 235, 237, 121, 127, 123, 188}) pool.push_back(id);
  // Lone continuation and lead bytes: the single-byte tokens of bytes 0x80-0xFF.
  for (int b = 0x80; b < 0x100; b += 7) {
    const auto ids = tok->encode(std::string(1, char(0xC3)) + char(0x80 | (b & 0x3F)));
    pool.insert(pool.end(), ids.begin(), ids.end());
  }
  expect_stream_matches_decode(*tok, pool, 3000, 1234);
}

TEST(BpeStreamDecoder, SentencePieceStyleRandomSequencesMatchDecode) {
  const auto tok = load_tokenizer(test::data_path("models/stories260K-hf"));
  std::vector<int32_t> pool = tok->encode("Once upon a time 東京 🙂  two  spaces");
  for (int32_t id = 0; id < 3 + 256; id += 3) pool.push_back(id);  // specials and <0xXX> bytes
  for (int32_t id : {3 + 0xE6, 3 + 0x9D, 3 + 0xB1, 3 + 0xF0, 3 + 0x9F, 3 + 0x99, 3 + 0x82}) pool.push_back(id);
  expect_stream_matches_decode(*tok, pool, 3000, 99);
}

TEST(BpeStreamDecoder, SplitCharactersAppearOnTheirLastToken) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  const auto tok = load_tokenizer(test::data_path("tokenizers/llama3"));
  const std::vector<int32_t> emoji = tok->encode("😀");  // one character over several tokens
  ASSERT_GT(emoji.size(), 1u);
  const auto stream = tok->stream_decoder();
  for (size_t i = 0; i + 1 < emoji.size(); ++i) EXPECT_EQ(stream->push(emoji[i]), "");
  EXPECT_EQ(stream->push(emoji.back()), "😀");
  EXPECT_EQ(stream->push(tok->encode("\xC3\xA9")[0]), "é");
  EXPECT_EQ(stream->finish(), "");

  const auto sp = load_tokenizer(test::data_path("models/stories260K-hf"));
  const auto s2 = sp->stream_decoder();
  EXPECT_EQ(s2->push(403), "Once");  // the leading "▁" is stripped once
  EXPECT_EQ(s2->push(3 + 0xE6), "");
  EXPECT_EQ(s2->push(3 + 0x9D), "");
  EXPECT_EQ(s2->push(3 + 0xB1), "");
  EXPECT_EQ(s2->push(407), "東 upon");  // a byte run is decided when it ends
  EXPECT_EQ(s2->push(3 + 0xE6), "");
  EXPECT_EQ(s2->finish(), "\xEF\xBF\xBD");  // an incomplete run: U+FFFD per byte
}

// Decoder chains that hold text back at the end (Strip's trailing characters after Fuse) or
// cannot decide token by token (ByteFallback after Fuse) still reproduce decode().
TEST(BpeStreamDecoder, HeldBackAndBufferedChainsMatchDecode) {
  const auto ref = test::read_json(test::tokenizer_test_data("bpe_pipeline_reference.json"));
  nlohmann::json tj = ref["variants"]["metaspace_first"]["tokenizer"];
  tj["model"]["vocab"] = ref["base_vocab"];
  tj["model"]["merges"] = ref["base_merges"];
  for (const char* decoder : {
           R"({"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
               {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 2, "stop": 2}]})",
           R"({"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "ByteFallback"}, {"type": "Metaspace",
               "replacement": "▁", "prepend_scheme": "always"}]})",
           R"({"type": "Sequence", "decoders": [{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first"},
               {"type": "Strip", "content": "l", "start": 1, "stop": 1}, {"type": "ByteFallback"}]})"}) {
    SCOPED_TRACE(decoder);
    tj["decoder"] = nlohmann::json::parse(decoder);
    test::TempDir dir;
    test::write_text(dir / "tokenizer.json", tj.dump());
    const auto tok = load_tokenizer(dir.path());
    std::vector<int32_t> pool = tok->encode("hello  world 東 🙂 ll");
    for (int32_t id : {1, 2, 3 + 0xE6, 3 + 0x9D, 3 + 0xB1, 3 + 0x80, 3 + ' '}) pool.push_back(id);
    expect_stream_matches_decode(*tok, pool, 1500, 7);
  }
}

}  // namespace
}  // namespace loft
