// Mistral 7B Instruct's chat templates, as their tokenizer_config.json chat_template and
// mistral-common render them:
//   v0.1/v0.2 (tokenizer v1): "<s> [INST] {system}\n\n{user} [/INST] {answer}</s> [INST] {user} [/INST]"
//   v0.3 (tokenizer v3):      "<s>[INST] {user}[/INST] {answer}</s>[INST] {system}\n\n{user}[/INST]"
// with [INST]/[/INST] plain text in v1 and control tokens in v3. The space before each [INST]
// (v1) and before each answer is SentencePiece's: every text piece is encoded on its own, so its
// dummy prefix ("▁") supplies it, as in mistral-common's encoding and HF's of the rendered string.
#include <string>

#include "engine/core/error.h"
#include "tokenizer/template_builder.h"

namespace loft::templates {

namespace {

constexpr std::string_view kInst = "[INST]", kInstEnd = "[/INST]";

// The user turn the system prompt joins: the first (v1) or the last (v3) user turn; -1 when none.
ptrdiff_t user_turn(const Conversation& conv, bool last) {
  ptrdiff_t found = -1;
  for (size_t i = 0; i < conv.turns.size(); ++i)
    if (conv.turns[i].role == Role::user) {
      found = ptrdiff_t(i);
      if (!last) break;
    }
  return found;
}

// The system turns' text, joined as mistral-common joins several ("\n\n").
std::string system_text(const Conversation& conv) {
  std::string s;
  for (const Turn& t : conv.turns)
    if (t.role == Role::system) s += (s.empty() ? "" : "\n\n") + t.text;
  return s;
}

void render(const Conversation& conv, PieceBuilder& b, bool v3) {
  const std::string system = system_text(conv);
  const ptrdiff_t system_turn = system.empty() ? -1 : user_turn(conv, v3);
  b.bos();
  for (size_t i = 0; i < conv.turns.size(); ++i) {
    const Turn& t = conv.turns[i];
    if (t.role == Role::system) continue;
    if (t.role == Role::assistant) {
      // v0.3's template trims the answer ("|trim"); v0.1/v0.2's keeps it as it is.
      b.text(v3 ? strip(t.text) : t.text, true);
      b.eos(true);
      continue;
    }
    const std::string content = (ptrdiff_t(i) == system_turn ? system + "\n\n" : "") + user_text(t);
    if (v3) {
      b.marker(kInst);
      b.text(content);
      b.marker(kInstEnd);
    } else {
      b.text(cat(kInst, " ", content, " ", kInstEnd));
    }
  }
}

}  // namespace

void render_mistral(const Conversation& conv, PieceBuilder& b) { render(conv, b, false); }
void render_mistral_v3(const Conversation& conv, PieceBuilder& b) { render(conv, b, true); }

}  // namespace loft::templates
