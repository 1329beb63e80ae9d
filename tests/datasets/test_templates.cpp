// Templates: exact rendered strings, BOS/EOS and special markers as ids, response flags; the Alpaca
// prompt checked against the canonical `text` field of alpaca_tiny.json.
#include <gtest/gtest.h>

#include <algorithm>

#include "datasets/record.h"
#include "datasets/record_reader.h"
#include "engine/core/error.h"
#include "tests/common/test_util.h"
#include "tests/datasets/fake_tokenizer.h"
#include "tokenizer/templates.h"

namespace loft {
namespace {

using test::ByteTokenizer;

Conversation chat() {
  return {{{Role::system, "Be brief.", {}},
           {Role::user, " Hi ", {}},
           {Role::assistant, " Hello! ", {}},
           {Role::user, "Again", {}},
           {Role::assistant, "Sure.", {}}}};
}

// The response pieces' text, concatenated.
std::string responses(const std::vector<TemplatePiece>& pieces, const Tokenizer& tok) {
  std::string s;
  for (const auto& p : pieces)
    if (p.response) s += p.id >= 0 ? "[" + tok.piece(p.id) + "]" : p.text;
  return s;
}

TEST(Templates, NamesRoundTripAndUnknownIsAUsageError) {
  for (auto t : kAllChatTemplates) EXPECT_EQ(parse_chat_template(chat_template_name(t)), t);
  EXPECT_EQ(parse_chat_template("llama3.1"), ChatTemplate::llama31);
  EXPECT_THROW(parse_chat_template("vicuna"), UsageError);
}

TEST(Templates, AlpacaMatchesTheCanonicalTextOfEveryAlpacaTinyRecord) {
  ByteTokenizer tok;
  auto reader = data::open_record_reader(test::data_path("alpaca/alpaca_tiny.json"), 1 << 20);
  data::RawRecord raw;
  int n = 0, with_input = 0;
  while (reader->next(raw)) {
    const auto j = data::parse_json_record(raw.text);
    const auto pieces = render_template(ChatTemplate::alpaca, data::to_conversation(j, data::RecordFormat::alpaca), tok);
    ASSERT_EQ(pieces.size(), 4u);
    EXPECT_EQ(pieces.front().id, ByteTokenizer::kBos);
    EXPECT_EQ(pieces.back().id, ByteTokenizer::kEos);
    EXPECT_TRUE(pieces.back().response);
    EXPECT_FALSE(pieces[1].response);
    EXPECT_EQ(pieces[1].text + pieces[2].text, j["text"].get<std::string>()) << "record " << n;
    EXPECT_EQ(pieces[2].text, j["output"].get<std::string>());
    with_input += !j["input"].get<std::string>().empty();
    ++n;
  }
  EXPECT_EQ(n, 100);
  EXPECT_EQ(with_input, 46);  // both prompt forms are covered
}

TEST(Templates, Llama2Chat) {
  ByteTokenizer tok;
  const auto pieces = render_template(ChatTemplate::llama2, chat(), tok);
  EXPECT_EQ(rendered_text(pieces, tok),
            // As Meta strips the user content only after folding the system block in front of it.
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi [/INST]Hello!</s><s>[INST] Again [/INST]Sure.</s>");
  EXPECT_EQ(responses(pieces, tok), "Hello![</s>]Sure.[</s>]");
  for (const auto& p : pieces) {
    if (p.id < 0) {
      EXPECT_EQ(p.text.find("<s>"), std::string::npos) << "BOS/EOS are ids, never text";
    }
  }
}

TEST(Templates, Llama3WithAndWithoutHeaderTokens) {
  ByteTokenizer with({"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"});
  const auto pieces = render_template(ChatTemplate::llama3, chat(), with);
  EXPECT_EQ(rendered_text(pieces, with),
            "<s><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nAgain<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nSure.<|eot_id|>");
  EXPECT_EQ(responses(pieces, with), "Hello![<|eot_id|>]Sure.[<|eot_id|>]");
  int special_ids = 0;
  for (const auto& p : pieces) {
    special_ids += p.id > 258;
    if (p.id < 0) {
      EXPECT_EQ(p.text.find("<|"), std::string::npos) << "markers the tokenizer has are ids";
    }
  }
  EXPECT_EQ(special_ids, 15);

  ByteTokenizer without;
  const auto plain = render_template(ChatTemplate::llama3, chat(), without);
  EXPECT_EQ(responses(plain, without), "Hello![</s>]Sure.[</s>]") << "end of turn falls back to EOS";
  EXPECT_NE(rendered_text(plain, without).find("<|start_header_id|>assistant<|end_header_id|>\n\n"), std::string::npos);
}

TEST(Templates, ChatML) {
  ByteTokenizer tok({"<|im_start|>", "<|im_end|>"});
  const auto pieces = render_template(ChatTemplate::chatml, chat(), tok);
  EXPECT_EQ(rendered_text(pieces, tok),
            "<s><|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n"
            "<|im_start|>assistant\n Hello! <|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n"
            "<|im_start|>assistant\nSure.<|im_end|>\n");
  EXPECT_EQ(responses(pieces, tok), " Hello! [<|im_end|>]Sure.[<|im_end|>]");
}

TEST(Templates, PlainAndAlpacaInputInChats) {
  ByteTokenizer tok;
  const Conversation pc{{{Role::user, "2+2=", {}}, {Role::assistant, "4", {}}}};
  const auto pieces = render_template(ChatTemplate::plain, pc, tok);
  EXPECT_EQ(rendered_text(pieces, tok), "<s>2+2=4</s>");
  EXPECT_EQ(responses(pieces, tok), "4[</s>]");
  const Conversation text{{{Role::assistant, "Once upon a time.", {}}}};
  EXPECT_EQ(responses(render_template(ChatTemplate::plain, text, tok), tok), "Once upon a time.[</s>]");
  // Alpaca's input joins the instruction after a blank line in chat templates.
  const Conversation alpaca{{{Role::user, "Translate.", "Bonjour"}, {Role::assistant, "Hello", {}}}};
  EXPECT_EQ(rendered_text(render_template(ChatTemplate::llama2, alpaca, tok), tok),
            "<s>[INST] Translate.\n\nBonjour [/INST]Hello</s>");
}

constexpr const char* kLlama3Specials[] = {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
ByteTokenizer llama3_bytes() { return ByteTokenizer({std::begin(kLlama3Specials), std::end(kLlama3Specials)}); }

// Llama 3.1 Instruct's chat_template (tools unused): the system block always comes first, with
// the knowledge/today dates, then the first message's content when it is a system one.
TEST(Templates, Llama31SystemBlock) {
  const ByteTokenizer tok = llama3_bytes();
  EXPECT_EQ(rendered_text(render_template(ChatTemplate::llama31, chat(), tok), tok),
            "<s><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nAgain<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nSure.<|eot_id|>");
  const Conversation no_system{{{Role::user, "Hi", {}}, {Role::assistant, "Yo", {}}}};
  const auto pieces = render_template(ChatTemplate::llama31, no_system, tok);
  EXPECT_EQ(rendered_text(pieces, tok),
            "<s><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nYo<|eot_id|>");
  EXPECT_EQ(responses(pieces, tok), "Yo[<|eot_id|>]") << "the system block is never trained";
}

// A conversation ending with a user turn, rendered for generation: the assistant header follows.
TEST(Templates, GenerationPrompt) {
  const ByteTokenizer tok({"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|im_start|>", "<|im_end|>"});
  const Conversation ask{{{Role::user, "Hi", {}}}};
  const auto text = [&](ChatTemplate t, bool gen) { return rendered_text(render_template(t, ask, tok, gen), tok); };
  EXPECT_EQ(text(ChatTemplate::llama3, true),
            "<s><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(text(ChatTemplate::llama31, true).substr(text(ChatTemplate::llama31, false).size()),
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(text(ChatTemplate::chatml, true), "<s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // Prompts that already end where the answer starts are unchanged.
  for (ChatTemplate t : {ChatTemplate::alpaca, ChatTemplate::llama2, ChatTemplate::mistral, ChatTemplate::mistral_v3,
                         ChatTemplate::plain})
    EXPECT_EQ(text(t, true), text(t, false)) << chat_template_name(t);
  EXPECT_EQ(text(ChatTemplate::qwen3, true), "<s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(text(ChatTemplate::qwen3_no_thinking, true),
            "<s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(text(ChatTemplate::llama2, true), "<s>[INST] Hi [/INST]");
  for (const auto& p : render_template(ChatTemplate::llama3, ask, tok, true)) EXPECT_FALSE(p.response);
}

// Mistral's templates (tests/tokenizer/test_chat_templates_real.cpp checks them on the real
// tokenizers): one BOS, answers and EOS trained, the system prompt in the first user turn (v1) or
// the last (v3, as mistral-common; HF's template drops it when the chat ends with an answer).
TEST(Templates, MistralSystemPromptAndResponses) {
  const ByteTokenizer tok({"[INST]", "[/INST]"});
  const auto v1 = render_template(ChatTemplate::mistral, chat(), tok);
  EXPECT_EQ(rendered_text(v1, tok), "<s>[INST] Be brief.\n\n Hi  [/INST] Hello! </s>[INST] Again [/INST]Sure.</s>");
  EXPECT_EQ(responses(v1, tok), " Hello! [</s>]Sure.[</s>]");
  const auto v3 = render_template(ChatTemplate::mistral_v3, chat(), tok);
  EXPECT_EQ(rendered_text(v3, tok), "<s>[INST] Hi [/INST]Hello!</s>[INST]Be brief.\n\nAgain[/INST]Sure.</s>");
  EXPECT_EQ(responses(v3, tok), "Hello![</s>]Sure.[</s>]") << "v3 trims the answer";
}

TEST(Templates, EndOfTurnIdIsWhatAssistantTurnsEndWith) {
  const ByteTokenizer tok({"<|eot_id|>", "<|im_end|>"}), bare;
  EXPECT_EQ(end_of_turn_id(ChatTemplate::llama3, tok), tok.special_id("<|eot_id|>"));
  EXPECT_EQ(end_of_turn_id(ChatTemplate::llama31, tok), tok.special_id("<|eot_id|>"));
  EXPECT_EQ(end_of_turn_id(ChatTemplate::chatml, tok), tok.special_id("<|im_end|>"));
  for (ChatTemplate t : kAllChatTemplates) {
    if (uses_chatml_turns(t)) {
      EXPECT_EQ(end_of_turn_id(t, tok), tok.special_id("<|im_end|>")) << chat_template_name(t);
    } else if (t != ChatTemplate::llama3 && t != ChatTemplate::llama31) {
      EXPECT_EQ(end_of_turn_id(t, tok), ByteTokenizer::kEos) << chat_template_name(t);
    }
    EXPECT_EQ(end_of_turn_id(t, bare), ByteTokenizer::kEos) << "without the marker: EOS";
    // It is the id that closes each assistant turn (the last response piece).
    const auto pieces = render_template(t, chat(), tok);
    const auto last = std::find_if(pieces.rbegin(), pieces.rend(), [](const TemplatePiece& p) { return p.response; });
    ASSERT_NE(last, pieces.rend());
    EXPECT_EQ(last->id, end_of_turn_id(t, tok)) << chat_template_name(t);
  }
}

}  // namespace
}  // namespace loft
