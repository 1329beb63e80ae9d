// Chat and instruction templates: a conversation rendered as a sequence of pieces, each either text
// (to encode) or one token id (BOS, EOS, and special tokens such as <|eot_id|> when the tokenizer
// has them). BOS/EOS are always ids, never literal text. Each piece says whether it is a response
// (an assistant turn's content and the end-of-turn token after it), which is what loss masks train.
//
// Pieces are encoded one by one, so a tokenizer that adds a leading space to each encode call
// (SentencePiece's dummy prefix) gives the space that separates e.g. "[/INST]" from the answer.
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

enum class ChatTemplate { alpaca, llama2, llama3, chatml, plain };
// Throws loft::UsageError naming --template for an unknown name.
ChatTemplate parse_chat_template(std::string_view name);
std::string_view chat_template_name(ChatTemplate t);

struct TemplatePiece {
  std::string text;   // used when id < 0
  int32_t id = -1;    // a token id, or -1 for text
  bool response = false;
};

// Renders `conv` with template `t`. Adjacent text pieces of the same kind are merged. The
// tokenizer supplies BOS/EOS and special ids (Tokenizer::special_id); a special marker the
// tokenizer lacks is written as text, except an end-of-turn marker, which then falls back to EOS so
// the model still learns to stop.
std::vector<TemplatePiece> render_template(ChatTemplate t, const Conversation& conv, const Tokenizer& tok);

// The text of the rendered pieces with ids shown by Tokenizer::piece (for `loft data inspect`).
std::string rendered_text(const std::vector<TemplatePiece>& pieces, const Tokenizer& tok);

}  // namespace loft
