// StreamDecoder against the library's own decode(): random id sequences rich in the cases where
// per-id text and whole-sequence text differ (byte-fallback runs, leading "▁", control, <unk>).
#include <gtest/gtest.h>

#include <random>

#include "tests/common/test_util.h"
#include "tokenizer/tokenizer.h"

namespace loft {
namespace {

std::string stream_all(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  const auto stream = tok.stream_decoder();
  std::string out;
  for (const int32_t id : ids) out += stream->push(id);
  return out + stream->finish();
}

class StreamDecoderTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Tokenizer> tok_ = load_sentencepiece(test::data_path(GetParam()));
};

TEST_P(StreamDecoderTest, RandomSequencesMatchDecode) {
  const Tokenizer& tok = *tok_;
  // The lone "▁" piece: both models encode a leading CJK character as "▁" + byte/char pieces.
  const int32_t space = tok.encode("\xE6\x9D\xB1").at(0);
  ASSERT_EQ(tok.piece(space), " ");
  // Ids whose text is a leading-space word, e.g. "▁Once", and plain words.
  const std::vector<int32_t> words = tok.encode("Once upon a time, the answer was 72!");
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> any(0, tok.vocab_size() - 1), len(0, 24), pick(0, 99);
  std::uniform_int_distribution<int32_t> lead(0xC0, 0xFF), cont(0x80, 0xBF), ascii(0x20, 0x7E);
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<int32_t> ids;
    const int n = len(rng);
    for (int i = 0; i < n; ++i) {
      const int r = pick(rng);
      if (r < 20) ids.push_back(3 + lead(rng));        // byte-fallback lead byte
      else if (r < 45) ids.push_back(3 + cont(rng));   // continuation byte
      else if (r < 50) ids.push_back(3 + ascii(rng));  // ASCII byte
      else if (r < 58) ids.push_back(int32_t(pick(rng) % 3));  // <unk>, <s>, </s>
      else if (r < 66) ids.push_back(space);
      else if (r < 85) ids.push_back(words[size_t(pick(rng)) % words.size()]);
      else ids.push_back(any(rng));
    }
    ASSERT_EQ(stream_all(tok, ids), tok.decode(ids)) << "trial " << trial;
  }
}

TEST_P(StreamDecoderTest, ByteCharactersAppearOnTheirLastByte) {
  const auto stream = tok_->stream_decoder();
  const int32_t emoji[] = {3 + 0xF0, 3 + 0x9F, 3 + 0x99, 3 + 0x82};
  EXPECT_EQ(stream->push(emoji[0]), "");
  EXPECT_EQ(stream->push(emoji[1]), "");
  EXPECT_EQ(stream->push(emoji[2]), "");
  EXPECT_EQ(stream->push(emoji[3]), "\xF0\x9F\x99\x82");
  // A lead byte cut short by the end of the sequence is flushed as U+FFFD by finish().
  EXPECT_EQ(stream->push(3 + 0xE6), "");
  EXPECT_EQ(stream->finish(), "\xEF\xBF\xBD");
}

TEST_P(StreamDecoderTest, ContinuationAfterAPromptMatchesTheTailOfDecode) {
  // Generation streams a continuation after the prompt: pushing the prompt first gives the
  // continuation exactly as it appears in decode(prompt + continuation).
  const auto prompt = tok_->encode("Once upon a time");
  const auto cont = tok_->encode(" there was a dog named 東京 🙂.");
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), cont.begin(), cont.end());
  const auto stream = tok_->stream_decoder();
  std::string head, tail;
  for (const int32_t id : prompt) head += stream->push(id);
  for (const int32_t id : cont) tail += stream->push(id);
  tail += stream->finish();
  EXPECT_EQ(head, tok_->decode(prompt));
  EXPECT_EQ(head + tail, tok_->decode(all));
}

INSTANTIATE_TEST_SUITE_P(BothTokenizers, StreamDecoderTest,
                         ::testing::Values("tokenizers/llama2/tokenizer.model",
                                           "models/stories260K/tok512.model"));

}  // namespace
}  // namespace loft
