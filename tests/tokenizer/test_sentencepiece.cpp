// SentencePieceTokenizer against the reference encodings made with the real SentencePiece
// library (tests/data/reference/tokenizer_reference_encodings.json), for both tokenizers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "tests/common/test_util.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace loft {
namespace {

using ::testing::HasSubstr;

const nlohmann::json& reference() {
  static const nlohmann::json j = [] {
    std::ifstream in(test::data_path("reference/tokenizer_reference_encodings.json"));
    if (!in) throw Error("cannot open tokenizer_reference_encodings.json under LOFT_TEST_DATA");
    return nlohmann::json::parse(in);
  }();
  return j;
}

// piece() is the decoded text of one id: "▁" as a space, "<0xNN>" as the byte NN.
std::string expected_piece_text(const std::string& raw) {
  if (raw.size() == 6 && raw.starts_with("<0x") && raw.ends_with(">"))
    return std::string(1, char(std::stoi(raw.substr(3, 2), nullptr, 16)));
  std::string out;
  for (size_t i = 0; i < raw.size();) {
    if (raw.compare(i, 3, "\xE2\x96\x81") == 0) {
      out += ' ';
      i += 3;
    } else {
      out += raw[i++];
    }
  }
  return out;
}

class SentencePieceReference : public ::testing::TestWithParam<std::string> {
 protected:
  const nlohmann::json& spec() const { return reference()["tokenizers"][GetParam()]; }
  std::unique_ptr<Tokenizer> load() const {
    return load_sentencepiece(test::data_path(spec()["model_file"].get<std::string>()));
  }
};

TEST_P(SentencePieceReference, IdsPiecesAndDecodeMatchTheLibrary) {
  const auto tok = load();
  const auto& cases = spec()["cases"];
  ASSERT_EQ(cases.size(), 12u);
  for (const auto& c : cases) {
    const std::string text = c["text"], decoded = c["decoded"];
    SCOPED_TRACE("text: " + text);
    const auto ids = tok->encode(text);
    EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>());
    const auto pieces = c["pieces"].get<std::vector<std::string>>();
    ASSERT_EQ(pieces.size(), ids.size());
    std::string joined;
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(tok->piece(ids[i]), expected_piece_text(pieces[i])) << "piece " << i;
      joined += tok->piece(ids[i]);
    }
    EXPECT_EQ(tok->decode(ids), decoded);
    // Joined pieces differ from decode() only by the leading space decode() drops.
    const bool leading_space = !pieces.empty() && pieces[0].starts_with("\xE2\x96\x81");
    EXPECT_EQ(joined, (leading_space ? " " : "") + decoded);
    // The stream decoder reproduces decode() exactly, one id at a time.
    const auto stream = tok->stream_decoder();
    std::string streamed;
    for (const int32_t id : ids) streamed += stream->push(id);
    streamed += stream->finish();
    EXPECT_EQ(streamed, decoded);
  }
}

TEST_P(SentencePieceReference, SpecialIds) {
  const auto tok = load();
  EXPECT_EQ(tok->vocab_size(), spec()["vocab_size"].get<int32_t>());
  EXPECT_EQ(tok->bos_id(), spec()["bos_id"].get<int32_t>());
  EXPECT_EQ(tok->eos_id(), spec()["eos_id"].get<int32_t>());
  EXPECT_EQ(tok->unk_id(), spec()["unk_id"].get<int32_t>());
  EXPECT_EQ(tok->pad_id(), spec()["pad_id"].get<int32_t>());
  EXPECT_EQ(tok->special_id("<s>"), 1);
  EXPECT_EQ(tok->special_id("</s>"), 2);
  EXPECT_EQ(tok->special_id("<unk>"), 0);
  for (const char* not_special :
       {"<pad>", "<|eot_id|>", "", "<0x0A>", "\xE2\x96\x81" "a", "a", "<s"})
    EXPECT_EQ(tok->special_id(not_special), -1) << not_special;
  // Control pieces are never produced from literal text, and they decode to nothing.
  const auto ids = tok->encode("<s>hi</s>");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 0);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 0);
  EXPECT_EQ(tok->piece(1), "");
  EXPECT_EQ(tok->decode({1, 2}), "");
}

TEST_P(SentencePieceReference, ByteFallbackPiecesAreSingleBytes) {
  const auto tok = load();
  // Both models put <0x00>..<0xFF> at ids 3..258.
  for (int b = 0; b < 256; ++b) EXPECT_EQ(tok->piece(3 + b), std::string(1, char(b))) << b;
  EXPECT_EQ(tok->decode({3 + 0xF0, 3 + 0x9F, 3 + 0x99, 3 + 0x82}), "\xF0\x9F\x99\x82");
  EXPECT_EQ(tok->decode({3 + 0xF0}), "\xEF\xBF\xBD");  // a lone lead byte is U+FFFD
}

TEST_P(SentencePieceReference, InvalidUtf8IsRejectedWithItsOffset) {
  const auto tok = load();
  const std::pair<std::string, std::string> cases[] = {
      {"abc\xFF", "invalid lead byte at byte offset 3"},
      {"Once\x80", "unexpected continuation byte at byte offset 4"},
      {"x\xC0\xAF", "overlong encoding at byte offset 1"},
      {"ok \xED\xA0\x80", "surrogate code point at byte offset 3"},
      {"\xF4\x90\x80\x80", "code point above U+10FFFF at byte offset 0"},
      {"na\xC3\xAFve \xE6\x9D", "truncated sequence at byte offset 7"},
      {"\xE6\x9D" "abc", "missing continuation byte at byte offset 0"},
  };
  for (const auto& [text, message] : cases) {
    try {
      tok->encode(text);
      ADD_FAILURE() << "no error for " << message;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("not valid UTF-8"));
      EXPECT_THAT(e.what(), HasSubstr(message));
    }
  }
}

TEST_P(SentencePieceReference, OutOfRangeIdsAreNamed) {
  const auto tok = load();
  const int32_t n = tok->vocab_size();
  for (const int32_t bad : {-1, n, n + 7, std::numeric_limits<int32_t>::max()}) {
    const std::string id = "token id " + std::to_string(bad) + " ";
    try {
      tok->decode({5, bad, 6});
      ADD_FAILURE() << "decode accepted id " << bad;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(id));
    }
    EXPECT_THROW(tok->piece(bad), Error);
    EXPECT_THROW(tok->stream_decoder()->push(bad), Error);
  }
  EXPECT_NO_THROW(tok->decode({n - 1}));
}

INSTANTIATE_TEST_SUITE_P(BothTokenizers, SentencePieceReference,
                         ::testing::Values("llama2_32000", "tok512_stories260K"));

TEST(SentencePiece, LlamaRoundTripsLongTextExactly) {
  // Llama 2 keeps every space (no remove_extra_whitespaces), so decode(encode(t)) == t.
  const auto tok = load_sentencepiece(test::data_path("tokenizers/llama2/tokenizer.model"));
  std::ifstream in(test::data_path("tinystories/tinystories_sample.txt"), std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(text.size(), 3000u);
  const auto ids = tok->encode(text);
  EXPECT_GT(ids.size(), 500u);
  EXPECT_EQ(tok->decode(ids), text);
}

}  // namespace
}  // namespace loft
