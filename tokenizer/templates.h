// Chat and instruction templates: a conversation rendered as a sequence of pieces, each either text
// (to encode) or one token id (BOS, EOS, and special tokens such as <|eot_id|> when the tokenizer
// has them). BOS/EOS are always ids, never literal text. Each piece says whether it is a response
// (an assistant turn's content and the end-of-turn token after it), which is what loss masks train.
//
// Pieces are encoded one by one, so a tokenizer that adds a leading space to each encode call
// (SentencePiece's dummy prefix) gives the space that separates e.g. "[/INST]" from the answer.
// For byte-level BPE (Llama 3, Qwen) this equals encoding the whole rendered string as Hugging
// Face does only where pieces meet at pre-tokenizer boundaries: the Llama 3 templates meet there
// (special tokens, and "\n\n" before stripped content); ChatML and Qwen's do unless an assistant
// turn's content starts with a line break (HF joins "\n" + "\n" into one token, loft encodes them
// apart). tests/datasets checks both on the real tokenizers.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace loft {

enum class Role { system, user, assistant };
std::string_view role_name(Role role);

struct Turn {
  Role role = Role::user;
  std::string text;
  // Alpaca's optional "input" (context for the instruction) on a user turn; chat templates append
  // it to the user text after a blank line.
  std::string input;
};

// One record, normalised: a plain text record is a single assistant turn.
struct Conversation {
  std::vector<Turn> turns;
};

// llama3.1 is Llama 3.1/3.2/3.3 Instruct's format: llama3 plus a system block that always opens
// the chat with "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" before the
// system prompt (3.1/3.3's fixed date; 3.2 renders today's date under transformers, which would
// make training data depend on the day it is tokenized).
//
// qwen2.5 is Qwen 2.5 Instruct's ChatML, which opens a conversation without a system turn with
// "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.". qwen3 is Qwen 3's
// (templates_qwen.cpp): ChatML whose assistant turns after the last user turn carry a
// "<think>\n...\n</think>\n\n" block and whose earlier assistant turns lose their reasoning;
// qwen3-no-thinking is the same with enable_thinking=false, which only changes the generation
// prompt (an empty thinking block follows it).
// mistral is Mistral 7B Instruct v0.1/v0.2's (tokenizer v1: "<s> [INST] ... [/INST] ...</s>"),
// mistral-v3 v0.3's (control tokens, "<s>[INST] ...[/INST] ...</s>"); templates_mistral.cpp.
enum class ChatTemplate { alpaca, llama2, llama3, llama31, chatml, qwen25, qwen3, qwen3_no_thinking, mistral, mistral_v3, plain };
inline constexpr ChatTemplate kAllChatTemplates[] = {
    ChatTemplate::alpaca, ChatTemplate::llama2,  ChatTemplate::llama3,  ChatTemplate::llama31,
    ChatTemplate::chatml, ChatTemplate::qwen25,  ChatTemplate::qwen3,   ChatTemplate::qwen3_no_thinking,
    ChatTemplate::mistral, ChatTemplate::mistral_v3, ChatTemplate::plain};
// Whether `t` is ChatML's turns (chatml and the Qwen templates): their turns end with <|im_end|>.
bool uses_chatml_turns(ChatTemplate t);
// Throws loft::UsageError naming --template for an unknown name.
ChatTemplate parse_chat_template(std::string_view name);
// Every template's name, comma-separated (for help texts and errors).
std::string chat_template_list();
std::string_view chat_template_name(ChatTemplate t);

struct TemplatePiece {
  std::string text;   // used when id < 0
  int32_t id = -1;    // a token id, or -1 for text
  bool response = false;
};

// Renders `conv` with template `t`. Adjacent text pieces of the same kind are merged. The
// tokenizer supplies BOS/EOS and special ids (Tokenizer::special_id); a special marker the
// tokenizer lacks is written as text, except an end-of-turn marker, which then falls back to EOS so
// the model still learns to stop. `add_generation_prompt` appends what opens the next assistant
// turn (the assistant header of llama3, chatml and qwen, plus qwen3-no-thinking's empty thinking
// block; the other templates' prompts already end there),
// for `generate` to continue from.
std::vector<TemplatePiece> render_template(ChatTemplate t, const Conversation& conv, const Tokenizer& tok,
                                           bool add_generation_prompt = false);

// The id that ends an assistant turn under `t` (<|eot_id|>, <|im_end|> for ChatML and Qwen, else EOS): what a model
// trained with the template learns to emit, so generation must stop at it. -1 when there is none.
int32_t end_of_turn_id(ChatTemplate t, const Tokenizer& tok);

// The text of the rendered pieces with ids shown by Tokenizer::piece (for `loft data inspect`).
std::string rendered_text(const std::vector<TemplatePiece>& pieces, const Tokenizer& tok);

}  // namespace loft
