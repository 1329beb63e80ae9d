// Qwen's chat templates: Qwen 2.5 Instruct's (ChatML with a default system prompt) and Qwen 3's
// (ChatML with thinking blocks), without tools, as their tokenizer_config.json chat_template
// renders them.
#include <string>

#include "tokenizer/template_builder.h"

namespace loft::templates {

namespace {

// Qwen 2.5 Instruct's chat_template, when the first message is not a system one.
constexpr std::string_view kQwen25DefaultSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";

std::string_view lstrip_newlines(std::string_view s) {
  const size_t n = s.find_first_not_of('\n');
  return n == std::string_view::npos ? std::string_view() : s.substr(n);
}

std::string_view rstrip_newlines(std::string_view s) {
  const size_t n = s.find_last_not_of('\n');
  return n == std::string_view::npos ? std::string_view() : s.substr(0, n + 1);
}

// An assistant turn's content split as Qwen 3's template splits it (when it holds "</think>"):
// the answer after the last "</think>", the reasoning between the last "<think>" before the first
// "</think>" and that "</think>", each with its line breaks trimmed as the template trims them.
struct Thought {
  std::string_view reasoning, answer;
};

Thought split_thought(std::string_view content) {
  const size_t first_close = content.find(kThinkClose);
  if (first_close == std::string_view::npos) return {{}, content};
  const size_t last_close = content.rfind(kThinkClose);
  std::string_view before = rstrip_newlines(content.substr(0, first_close));
  if (const size_t open = before.rfind(kThinkOpen); open != std::string_view::npos)
    before = before.substr(open + kThinkOpen.size());
  return {lstrip_newlines(before), lstrip_newlines(content.substr(last_close + kThinkClose.size()))};
}

// A user turn that only carries a tool's answer, which the template does not count as a query.
bool is_tool_response(std::string_view s) {
  return s.starts_with("<tool_response>") && s.ends_with("</tool_response>");
}

}  // namespace

void render_qwen25(const Conversation& conv, PieceBuilder& b) { render_chatml(conv, b, kQwen25DefaultSystem); }

void render_qwen3(const Conversation& conv, PieceBuilder& b) {
  // The last user turn (the template's last_query_index; the last index when there is none):
  // assistant turns after it keep their thinking block, earlier ones lose their reasoning.
  size_t last_query = conv.turns.empty() ? 0 : conv.turns.size() - 1;
  for (size_t i = conv.turns.size(); i-- > 0;)
    if (conv.turns[i].role == Role::user && !is_tool_response(conv.turns[i].text)) {
      last_query = i;
      break;
    }
  b.bos();
  for (size_t i = 0; i < conv.turns.size(); ++i) {
    const Turn& t = conv.turns[i];
    chatml_header(b, role_name(t.role));
    if (t.role != Role::assistant) {
      b.text(user_text(t));
      b.end_of_turn(kImEnd, false);
      b.text("\n");
      continue;
    }
    const Thought th = split_thought(t.text);
    const bool last = i + 1 == conv.turns.size();
    if (i > last_query && (last || !th.reasoning.empty())) {
      // reasoning.strip('\n') after the lstrip above: trailing line breaks too.
      const std::string_view reasoning = rstrip_newlines(th.reasoning);
      b.text(std::string(kThinkOpen) + "\n" + std::string(reasoning) + "\n" + std::string(kThinkClose) + "\n\n" +
                 std::string(lstrip_newlines(th.answer)),
             true);
    } else {
      b.text(th.answer, true);
    }
    b.end_of_turn(kImEnd, true);
    b.text("\n");
  }
}

}  // namespace loft::templates
