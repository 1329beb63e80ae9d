#include "tokenizer/templates.h"

#include "engine/core/error.h"
#include "tokenizer/template_builder.h"

namespace loft {

namespace templates {

std::string strip(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

std::string user_text(const Turn& t) { return t.input.empty() ? t.text : t.text + "\n\n" + t.input; }

int32_t marker_or_eos(const Tokenizer& tok, std::string_view spelled) {
  const int32_t sid = tok.special_id(spelled);
  return sid >= 0 ? sid : tok.eos_id();
}

void PieceBuilder::text(std::string_view s, bool response) {
  if (s.empty()) return;
  if (!pieces_.empty() && pieces_.back().id < 0 && pieces_.back().response == response) {
    pieces_.back().text += s;
    return;
  }
  pieces_.push_back({std::string(s), -1, response});
}

void PieceBuilder::marker(std::string_view spelled, bool response) {
  const int32_t sid = tok_.special_id(spelled);
  if (sid >= 0)
    id(sid, response);
  else
    text(spelled, response);
}

void chatml_header(PieceBuilder& b, std::string_view role) {
  b.marker(kImStart);
  b.text(std::string(role) + "\n");
}

void render_chatml(const Conversation& conv, PieceBuilder& b, std::string_view default_system) {
  b.bos();
  if (!default_system.empty() && (conv.turns.empty() || conv.turns[0].role != Role::system)) {
    chatml_header(b, role_name(Role::system));
    b.text(default_system);
    b.end_of_turn(kImEnd, false);
    b.text("\n");
  }
  for (const Turn& t : conv.turns) {
    const bool response = t.role == Role::assistant;
    chatml_header(b, role_name(t.role));
    b.text(response ? t.text : user_text(t), response);
    b.end_of_turn(kImEnd, response);
    b.text("\n");
  }
}

}  // namespace templates

namespace {

using namespace templates;

// Alpaca, as in tatsu-lab/stanford_alpaca train.py PROMPT_DICT, with the "\n" after
// "### Response:" that the released alpaca `text` field and alpaca-lora's template carry.
constexpr std::string_view kAlpacaWithInput =
    "Below is an instruction that describes a task, paired with an input that provides further context. "
    "Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n";
constexpr std::string_view kAlpacaNoInput =
    "Below is an instruction that describes a task. Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Response:\n";

// Llama-2 chat, as in meta-llama/llama generation.py: the system prompt is folded into the first
// user turn; each exchange is BOS "[INST] {user} [/INST] {answer}" EOS with stripped contents.
constexpr std::string_view kInstOpen = "[INST] ", kInstClose = " [/INST]";
constexpr std::string_view kSysOpen = "<<SYS>>\n", kSysClose = "\n<</SYS>>\n\n";

// Llama-3 chat, as in meta-llama/llama3 tokenizer.py ChatFormat: <|begin_of_text|> (= BOS), then
// per message "<|start_header_id|>{role}<|end_header_id|>\n\n{content stripped}<|eot_id|>".
constexpr std::string_view kStartHeader = "<|start_header_id|>", kEndHeader = "<|end_header_id|>";
constexpr std::string_view kEotId = "<|eot_id|>";
// Llama 3.1 Instruct's chat_template (also 3.3's) without tools: a system block always comes
// first, holding this preamble and then the first message's content when that is a system one.
constexpr std::string_view kLlama31Preamble = "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";

std::string replace_all(std::string s, std::string_view key, std::string_view value) {
  for (size_t at = s.find(key); at != std::string::npos; at = s.find(key, at + value.size()))
    s.replace(at, key.size(), value);
  return s;
}

// Templates made of BOS <prompt> <response> EOS blocks, one per exchange (Alpaca, Llama-2 chat).
// System text is held until the next user turn, whose prompt `prompt(turn, system)` builds.
template <typename PromptFn>
void render_exchanges(const Conversation& conv, PieceBuilder& b, PromptFn prompt, bool strip_response) {
  std::string system;
  bool need_bos = true;
  for (const Turn& t : conv.turns) {
    if (t.role == Role::system) {
      system += t.text;
      continue;
    }
    if (need_bos) b.bos();
    need_bos = false;
    if (t.role == Role::user) {
      b.text(prompt(t, system));
      system.clear();
    } else {
      b.text(strip_response ? strip(t.text) : t.text, true);
      b.eos(true);
      need_bos = true;
    }
  }
}

void render_alpaca(const Conversation& conv, PieceBuilder& b) {
  render_exchanges(
      conv, b,
      [](const Turn& t, const std::string& system) {
        const std::string_view form = t.input.empty() ? kAlpacaNoInput : kAlpacaWithInput;
        const std::string p = replace_all(replace_all(std::string(form), "{instruction}", t.text), "{input}", t.input);
        return system.empty() ? p : system + "\n\n" + p;
      },
      false);
}

void render_llama2(const Conversation& conv, PieceBuilder& b) {
  render_exchanges(
      conv, b,
      [](const Turn& t, const std::string& system) {
        std::string content = user_text(t);
        if (!system.empty()) content = std::string(kSysOpen) + system + std::string(kSysClose) + content;
        return std::string(kInstOpen) + strip(content) + std::string(kInstClose);
      },
      true);
}

void llama3_header(PieceBuilder& b, std::string_view role) {
  b.marker(kStartHeader);
  b.text(role);
  b.marker(kEndHeader);
  b.text("\n\n");
}

void render_llama3(const Conversation& conv, PieceBuilder& b, bool llama31) {
  b.bos();
  size_t first = 0;
  if (llama31) {
    llama3_header(b, "system");
    b.text(kLlama31Preamble);
    if (!conv.turns.empty() && conv.turns[0].role == Role::system) b.text(strip(conv.turns[first++].text));
    b.end_of_turn(kEotId, false);
  }
  for (size_t i = first; i < conv.turns.size(); ++i) {
    const Turn& t = conv.turns[i];
    const bool response = t.role == Role::assistant;
    llama3_header(b, role_name(t.role));
    b.text(strip(response ? t.text : user_text(t)), response);
    b.end_of_turn(kEotId, response);
  }
}

// Texts concatenated as they are (the prompt/completion convention); EOS after each response.
void render_plain(const Conversation& conv, PieceBuilder& b) {
  b.bos();
  for (const Turn& t : conv.turns) {
    if (t.role != Role::assistant) {
      b.text(user_text(t));
      continue;
    }
    b.text(t.text, true);
    b.eos(true);
  }
}

}  // namespace

bool uses_chatml_turns(ChatTemplate t) {
  return t == ChatTemplate::chatml || t == ChatTemplate::qwen25 || t == ChatTemplate::qwen3 ||
         t == ChatTemplate::qwen3_no_thinking;
}

std::string_view role_name(Role role) {
  switch (role) {
    case Role::system: return "system";
    case Role::user: return "user";
    case Role::assistant: return "assistant";
  }
  return "?";
}

std::string chat_template_list() {
  std::string names;
  for (ChatTemplate t : kAllChatTemplates) names += cat(names.empty() ? "" : ", ", chat_template_name(t));
  return names;
}

ChatTemplate parse_chat_template(std::string_view name) {
  for (ChatTemplate t : kAllChatTemplates)
    if (chat_template_name(t) == name) return t;
  throw UsageError(cat("--template: unknown template '", name, "' (expected one of ", chat_template_list(), ")"));
}

std::string_view chat_template_name(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::alpaca: return "alpaca";
    case ChatTemplate::llama2: return "llama2";
    case ChatTemplate::llama3: return "llama3";
    case ChatTemplate::llama31: return "llama3.1";
    case ChatTemplate::chatml: return "chatml";
    case ChatTemplate::qwen25: return "qwen2.5";
    case ChatTemplate::qwen3: return "qwen3";
    case ChatTemplate::qwen3_no_thinking: return "qwen3-no-thinking";
    case ChatTemplate::mistral: return "mistral";
    case ChatTemplate::mistral_v3: return "mistral-v3";
    case ChatTemplate::plain: return "plain";
  }
  return "?";
}

std::vector<TemplatePiece> render_template(ChatTemplate t, const Conversation& conv, const Tokenizer& tok,
                                           bool add_generation_prompt) {
  PieceBuilder b(tok);
  switch (t) {
    case ChatTemplate::alpaca: render_alpaca(conv, b); break;
    case ChatTemplate::llama2: render_llama2(conv, b); break;
    case ChatTemplate::llama3:
    case ChatTemplate::llama31: render_llama3(conv, b, t == ChatTemplate::llama31); break;
    case ChatTemplate::chatml: render_chatml(conv, b); break;
    case ChatTemplate::qwen25: render_qwen25(conv, b); break;
    case ChatTemplate::qwen3:
    case ChatTemplate::qwen3_no_thinking: render_qwen3(conv, b); break;
    case ChatTemplate::mistral: render_mistral(conv, b); break;
    case ChatTemplate::mistral_v3: render_mistral_v3(conv, b); break;
    case ChatTemplate::plain: render_plain(conv, b); break;
  }
  if (add_generation_prompt) {
    if (t == ChatTemplate::llama3 || t == ChatTemplate::llama31) llama3_header(b, role_name(Role::assistant));
    if (uses_chatml_turns(t)) chatml_header(b, role_name(Role::assistant));
    // Qwen 3 with enable_thinking=false: an empty thinking block is part of the prompt.
    if (t == ChatTemplate::qwen3_no_thinking) b.text("<think>\n\n</think>\n\n");
  }
  return b.take();
}

int32_t end_of_turn_id(ChatTemplate t, const Tokenizer& tok) {
  switch (t) {
    case ChatTemplate::llama3:
    case ChatTemplate::llama31: return marker_or_eos(tok, kEotId);
    default: return uses_chatml_turns(t) ? marker_or_eos(tok, kImEnd) : tok.eos_id();
  }
}

std::string rendered_text(const std::vector<TemplatePiece>& pieces, const Tokenizer& tok) {
  std::string out;
  for (const TemplatePiece& p : pieces) out += p.id >= 0 ? tok.piece(p.id) : p.text;
  return out;
}

}  // namespace loft
