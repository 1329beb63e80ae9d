// Loss masks after tokenization, truncation, and packing into rows (pre-shifted targets,
// restarting positions, document ids, padding).
#include <gtest/gtest.h>

#include "datasets/packer.h"
#include "datasets/tokenize.h"
#include "engine/core/error.h"
#include "tests/common/test_util.h"
#include "tests/datasets/fake_tokenizer.h"

namespace loft::data {
namespace {

using test::ByteTokenizer;
constexpr int32_t kIgnore = PackedBatch::kIgnore;

// The bytes of the trained tokens (EOS shown as '$').
std::string trained_text(const TokenizedExample& ex) {
  std::string s;
  for (size_t i = 0; i < ex.size(); ++i)
    if (ex.trained[i]) s += ex.ids[i] == ByteTokenizer::kEos ? '$' : char(ex.ids[i] - ByteTokenizer::kFirstByte);
  return s;
}

TEST(Tokenize, OnlyResponsesAndTheirEosAreTrainedByDefault) {
  ByteTokenizer tok;
  const Conversation c{{{Role::user, "Q?", {}}, {Role::assistant, "A.", {}}}};
  const TokenizedExample ex = tokenize_conversation(c, ChatTemplate::plain, tok, false);
  EXPECT_EQ(ex.ids, (std::vector<int32_t>{1, 3 + 'Q', 3 + '?', 3 + 'A', 3 + '.', 2}));
  EXPECT_EQ(ex.trained, (std::vector<uint8_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(ex.trained_count(), 3);
  const TokenizedExample all = tokenize_conversation(c, ChatTemplate::plain, tok, true);
  EXPECT_EQ(all.trained, (std::vector<uint8_t>{0, 1, 1, 1, 1, 1})) << "--train-on-inputs; BOS is never a target";
}

TEST(Tokenize, EveryAssistantTurnOfAConversationIsTrained) {
  ByteTokenizer tok({"<|im_start|>", "<|im_end|>"});
  const Conversation c{{{Role::system, "S", {}},
                        {Role::user, "u1", {}},
                        {Role::assistant, "a1", {}},
                        {Role::user, "u2", {}},
                        {Role::assistant, "a2", {}}}};
  const TokenizedExample ex = tokenize_conversation(c, ChatTemplate::chatml, tok, false);
  const int32_t im_end = tok.special_id("<|im_end|>");
  std::string trained;
  for (size_t i = 0; i < ex.size(); ++i)
    if (ex.trained[i]) trained += ex.ids[i] == im_end ? std::string("|") : std::string(1, char(ex.ids[i] - 3));
  EXPECT_EQ(trained, "a1|a2|");
  EXPECT_EQ(trained_text(tokenize_conversation(c, ChatTemplate::llama2, tok, false)), "a1$a2$");
}

// Llama 3: each assistant turn trains its text and the <|eot_id|> after it, never the headers.
TEST(Tokenize, Llama3AssistantTurnsTrainTheirEotId) {
  ByteTokenizer tok({"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"});
  const Conversation c{{{Role::user, "u1", {}}, {Role::assistant, " a1 ", {}}, {Role::user, "u2", {}},
                        {Role::assistant, "a2", {}}}};
  const int32_t eot = tok.special_id("<|eot_id|>");
  for (ChatTemplate t : {ChatTemplate::llama3, ChatTemplate::llama31}) {
    const TokenizedExample ex = tokenize_conversation(c, t, tok, false);
    std::string trained;
    for (size_t i = 0; i < ex.size(); ++i)
      if (ex.trained[i]) trained += ex.ids[i] == eot ? std::string("|") : std::string(1, char(ex.ids[i] - 3));
    EXPECT_EQ(trained, "a1|a2|") << chat_template_name(t);
  }
}

TEST(Tokenize, TruncationKeepsThePrefix) {
  ByteTokenizer tok;
  TokenizedExample ex = tokenize_conversation({{{Role::assistant, "abcdef", {}}}}, ChatTemplate::plain, tok, false);
  EXPECT_FALSE(truncate_example(ex, 8));
  EXPECT_TRUE(truncate_example(ex, 4));
  EXPECT_EQ(ex.ids, (std::vector<int32_t>{1, 3 + 'a', 3 + 'b', 3 + 'c'}));
  EXPECT_EQ(ex.trained.size(), 4u);
}

TokenizedExample example(std::vector<int32_t> ids, std::vector<uint8_t> trained) { return {std::move(ids), std::move(trained)}; }

TEST(Packer, PacksWholeExamplesWithShiftedTargetsRestartingPositionsAndDocIds) {
  Packer p(/*seq=*/8, /*rows=*/2, /*packing=*/true, /*pad=*/0);
  p.add(example({10, 11, 12, 13}, {0, 0, 1, 1}));
  p.add(example({20, 21, 22}, {0, 1, 1}));
  EXPECT_FALSE(p.ready());
  p.add(example({30, 31, 32}, {0, 0, 1}));  // does not fit the 1 token left: starts row 2
  p.add(example({40, 41, 42, 43, 44}, {0, 1, 0, 1, 1}));
  ASSERT_TRUE(p.ready());
  const PackedBatch b = p.take();
  EXPECT_EQ(b.rows, 2);
  EXPECT_EQ(b.seq, 8);
  EXPECT_EQ(b.ids, (std::vector<int32_t>{10, 11, 12, 13, 20, 21, 22, 0, 30, 31, 32, 40, 41, 42, 43, 44}));
  EXPECT_EQ(b.positions, (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 0, 0, 1, 2, 0, 1, 2, 3, 4}));
  EXPECT_EQ(b.doc_ids, (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1, -1, 0, 0, 0, 1, 1, 1, 1, 1}));
  // targets[t] = ids[t+1] of the same example where that token is trained; never across examples.
  EXPECT_EQ(b.targets, (std::vector<int32_t>{kIgnore, 12, 13, kIgnore, 21, 22, kIgnore, kIgnore,  //
                                             kIgnore, 32, kIgnore, 41, kIgnore, 43, 44, kIgnore}));
  EXPECT_EQ(b.trained_tokens, 8);
  EXPECT_EQ(b.examples, 4);
  EXPECT_TRUE(p.empty());
}

TEST(Packer, WithoutPackingEachExampleHasItsRowAndFlushGivesTheRest) {
  Packer p(6, 4, false, 2);
  p.add(example({10, 11}, {0, 1}));
  p.add(example({20, 21, 22, 23, 24, 25}, {0, 1, 1, 1, 1, 1}));
  p.add(example({30, 31, 32}, {0, 0, 1}));
  EXPECT_FALSE(p.ready());
  const PackedBatch b = p.flush();
  EXPECT_EQ(b.rows, 3);
  EXPECT_EQ(b.ids, (std::vector<int32_t>{10, 11, 2, 2, 2, 2, 20, 21, 22, 23, 24, 25, 30, 31, 32, 2, 2, 2}));
  EXPECT_EQ(b.doc_ids, (std::vector<int32_t>{0, 0, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1}));
  EXPECT_EQ(b.targets[0], 11);
  EXPECT_EQ(b.targets[11], kIgnore);
  EXPECT_TRUE(p.empty());
  EXPECT_THROW(p.add(example({1, 2, 3, 4, 5, 6, 7}, {0, 1, 1, 1, 1, 1, 1})), Error) << "truncate first";
}

TEST(Packer, StateRoundTripAndMismatchedOptions) {
  Packer a(8, 2, true, 0);
  a.add(example({1, 2, 3, 4, 5}, {0, 1, 1, 1, 1}));
  a.add(example({6, 7, 8, 9}, {0, 1, 0, 1}));
  a.add(example({10, 11}, {0, 1}));
  Packer b(8, 2, true, 0);
  b.restore(nlohmann::json::parse(a.state().dump()));
  a.add(example({12, 13, 14, 15, 16, 17, 18}, {0, 1, 1, 1, 1, 1, 1}));
  b.add(example({12, 13, 14, 15, 16, 17, 18}, {0, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(a.take(), b.take());
  EXPECT_EQ(a.flush(), b.flush());
  Packer other_seq(16, 2, true, 0);
  EXPECT_THROW(other_seq.restore(a.state()), UsageError);
}

// A saved example is read back exactly or refused naming the field: ids beyond int32, negative
// ids, fractional ids and flags other than 0/1 were once narrowed into range silently.
TEST(Packer, SavedExamplesOutOfRangeAreRefused) {
  EXPECT_EQ(tokenized_example_from_json(nlohmann::json::parse(R"({"ids": [1, 2], "trained": [0, 1]})")).ids,
            (std::vector<int32_t>{1, 2}));
  for (const char* bad : {R"({"ids": [1099511627776], "trained": [0]})", R"({"ids": [-3], "trained": [0]})",
                          R"({"ids": [1.5], "trained": [0]})", R"({"ids": [1], "trained": [300]})",
                          R"({"ids": [1, 2], "trained": [0]})", R"({"ids": "12", "trained": []})",
                          R"({"trained": []})", R"([1, 2])"}) {
    try {
      tokenized_example_from_json(nlohmann::json::parse(bad));
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_TRUE(test::contains(e.what(), "the saved data position: field example.")) << e.what();
    }
  }
  // The packer's own numbers are typed too: a seq of 1.6e87 (found by fuzz_trainer_state) was
  // converted to an integer with undefined behaviour.
  Packer p(16, 2, true, 0);
  try {
    p.restore(nlohmann::json::parse(
        R"({"seq": 1.6e87, "batch_rows": 2, "packing": true, "rows": [], "current": []})"));
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "field packer.seq must be an integer")) << e.what();
  }
}

}  // namespace
}  // namespace loft::data
