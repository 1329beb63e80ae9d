// Template pieces are encoded one at a time (tokenizer/templates.h). With Llama 3's byte-level BPE
// that must give exactly the ids Hugging Face gets from the whole rendered string: checked on the
// real tokenizer.json for many conversations, and against an id list made by HF tokenizers.
#include <gtest/gtest.h>

#include "datasets/tokenize.h"
#include "tests/common/llama3_checkpoint.h"
#include "tests/common/test_util.h"
#include "tokenizer/templates.h"

namespace loft {
namespace {

// The rendered conversation as one string, special tokens spelled out (encode() recognises them).
std::string full_text(const std::vector<TemplatePiece>& pieces, const Tokenizer& tok) {
  std::string s;
  for (const TemplatePiece& p : pieces) {
    if (p.id < 0) {
      s += p.text;
      continue;
    }
    for (const AddedToken& t : tok.added_tokens())
      if (t.id == p.id) s += t.content;
  }
  return s;
}

std::unique_ptr<Tokenizer> llama3() { return load_tokenizer(test::data_path("tokenizers/llama3")); }

TEST(Llama3TemplateBpe, PiecewiseIdsEqualTheWholeStringsIds) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  const auto tok = llama3();
  const std::vector<Conversation> convs = {
      {{{Role::user, "Hi", {}}, {Role::assistant, "Hello!", {}}}},
      {{{Role::system, "  You are terse.\n", {}},
        {Role::user, "What is 12345 + 678?", "Show the sum."},
        {Role::assistant, " 13023 ", {}},
        {Role::user, "'s and 've?", {}},
        {Role::assistant, "\"Quotes\", (brackets) and\n\nnewlines\n- a list", {}}}},
      {{{Role::user, "日本語 and émojis 🎉", {}}, {Role::assistant, "  ¡Sí! 123abc\t\ttabs", {}}}},
      {{{Role::user, "!!!", {}}, {Role::assistant, "...", {}}, {Role::user, "\n\nleading newlines", {}},
        {Role::assistant, "    code()\n", {}}}},
  };
  for (ChatTemplate t : {ChatTemplate::llama3, ChatTemplate::llama31}) {
    for (size_t i = 0; i < convs.size(); ++i) {
      const auto pieces = render_template(t, convs[i], *tok);
      const data::TokenizedExample ex = data::tokenize_conversation(convs[i], t, *tok, false);
      EXPECT_EQ(ex.ids, tok->encode(full_text(pieces, *tok))) << chat_template_name(t) << " conversation " << i;
      const auto prompt = render_template(t, convs[i], *tok, /*add_generation_prompt=*/true);
      std::vector<int32_t> ids;
      for (const TemplatePiece& p : prompt) {
        const auto part = p.id >= 0 ? std::vector<int32_t>{p.id} : tok->encode(p.text);
        ids.insert(ids.end(), part.begin(), part.end());
      }
      EXPECT_EQ(ids, tok->encode(full_text(prompt, *tok))) << "generation prompt " << i;
    }
  }
}

// tests/data/reference/llama3_tokenizer_reference.json: HF tokenizers encodes
// "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>" as these ids.
TEST(Llama3TemplateBpe, MatchesHuggingFaceIdsForAUserTurn) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  const auto tok = llama3();
  const Conversation c{{{Role::user, "Hi", {}}, {Role::assistant, "Hi", {}}}};
  const data::TokenizedExample ex = data::tokenize_conversation(c, ChatTemplate::llama3, *tok, false);
  const std::vector<int32_t> user = {test::kStartHeader, 882, test::kEndHeader, 271, 13347, test::kEotId};
  ASSERT_GE(ex.ids.size(), 1 + user.size());
  EXPECT_EQ(ex.ids[0], test::kBeginOfText);
  EXPECT_EQ(std::vector<int32_t>(ex.ids.begin() + 1, ex.ids.begin() + 1 + long(user.size())), user);
  EXPECT_EQ(ex.ids.back(), test::kEotId);
  EXPECT_EQ(ex.trained.back(), 1) << "the assistant's <|eot_id|> is trained";
}

}  // namespace
}  // namespace loft
