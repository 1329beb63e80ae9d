// What the chat template renderers share (templates.cpp, templates_qwen.cpp,
// templates_mistral.cpp): the piece builder and the text helpers. Not for use outside tokenizer/.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/templates.h"

namespace loft::templates {

// Python's str.strip() of whitespace (" \t\r\n"), as the templates' trim/strip do.
std::string strip(std::string_view s);
// The user text a chat template shows: Alpaca's input, if any, follows the instruction.
std::string user_text(const Turn& t);
// An end-of-turn marker's id, else EOS (so the model learns to stop even without the marker).
int32_t marker_or_eos(const Tokenizer& tok, std::string_view spelled);

class PieceBuilder {
 public:
  explicit PieceBuilder(const Tokenizer& tok) : tok_(tok) {}

  // Text to encode; merged into the previous piece when that is text of the same kind.
  void text(std::string_view s, bool response = false);
  void id(int32_t token, bool response = false) {
    if (token >= 0) pieces_.push_back({{}, token, response});
  }
  void bos() { id(tok_.bos_id()); }
  void eos(bool response) { id(tok_.eos_id(), response); }
  // A special marker: its id when the tokenizer has one, else its text.
  void marker(std::string_view spelled, bool response = false);
  // An end-of-turn marker (see marker_or_eos).
  void end_of_turn(std::string_view spelled, bool response) { id(marker_or_eos(tok_, spelled), response); }
  std::vector<TemplatePiece> take() { return std::move(pieces_); }

 private:
  const Tokenizer& tok_;
  std::vector<TemplatePiece> pieces_;
};

// ChatML, as in OpenAI's ChatML description and HF chat templates:
// "<|im_start|>{role}\n{content}<|im_end|>\n" per message.
inline constexpr std::string_view kImStart = "<|im_start|>", kImEnd = "<|im_end|>";

// ChatML's "<|im_start|>{role}\n" (ChatML, Qwen 2.5, Qwen 3).
void chatml_header(PieceBuilder& b, std::string_view role);
// ChatML's turns, "<|im_start|>{role}\n{content}<|im_end|>\n" each; a non-empty `default_system`
// opens a conversation that has no system turn of its own (Qwen 2.5's).
void render_chatml(const Conversation& conv, PieceBuilder& b, std::string_view default_system = {});
// The Qwen families (templates_qwen.cpp) and Mistral's (templates_mistral.cpp).
void render_qwen25(const Conversation& conv, PieceBuilder& b);
void render_qwen3(const Conversation& conv, PieceBuilder& b);
void render_mistral(const Conversation& conv, PieceBuilder& b);
void render_mistral_v3(const Conversation& conv, PieceBuilder& b);

}  // namespace loft::templates
