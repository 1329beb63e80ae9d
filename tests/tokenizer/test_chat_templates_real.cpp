// loft's Qwen and Mistral chat templates against the real Jinja templates, rendered by jinja2 as
// transformers renders them (tests/tokenizer/data/chat_template_reference.json, made by
// scripts/dev/chat_template_reference.py), on the real tokenizers: the rendered text, and for
// Qwen's byte-level BPE the ids of the whole rendered string, which HF's apply_chat_template
// gives. Mistral's ids are checked against mistral-common's own encoding of a chat.
#include <gtest/gtest.h>

#include "datasets/tokenize.h"
#include "tests/common/test_util.h"
#include "tests/tokenizer/bpe_test_util.h"
#include "tokenizer/chat_template_detect.h"
#include "tokenizer/templates.h"

namespace loft {
namespace {

Conversation conversation(const nlohmann::json& messages) {
  Conversation c;
  for (const auto& m : messages) {
    const std::string role = m["role"];
    c.turns.push_back({role == "system" ? Role::system : role == "user" ? Role::user : Role::assistant,
                       m["content"].get<std::string>(), {}});
  }
  return c;
}

// The text of an id as the rendered string spells it: its added token (or control piece), or BOS/EOS.
std::string spelled(const Tokenizer& tok, int32_t id) {
  if (id == tok.bos_id()) return "<s>";
  if (id == tok.eos_id() && tok.kind() == "sentencepiece") return "</s>";
  for (const AddedToken& t : tok.added_tokens())
    if (t.id == id) return t.content;
  return "?";
}

// The rendered pieces as one string. `dummy_prefix`: SentencePiece puts a space before each text
// piece (each is encoded on its own), which the Jinja template spells out.
std::string joined(const std::vector<TemplatePiece>& pieces, const Tokenizer& tok, bool dummy_prefix) {
  std::string s;
  for (const TemplatePiece& p : pieces) s += p.id >= 0 ? spelled(tok, p.id) : (dummy_prefix ? " " : "") + p.text;
  return s;
}

const Tokenizer& qwen3() {
  static const auto tok = load_tokenizer(test::data_path("tokenizers/qwen3"));
  return *tok;
}

const Tokenizer& mistral(const std::string& version) {
  static const auto v1 = load_sentencepiece(test::data_path("tokenizers/mistral-v1/tokenizer.model"));
  static const auto v3 = load_sentencepiece(test::data_path("tokenizers/mistral-v3/tokenizer.model"));
  return version == "v1" ? *v1 : *v3;
}

TEST(ChatTemplatesReal, RenderAsTheJinjaTemplates) {
  const auto ref = test::read_json(test::tokenizer_test_data("chat_template_reference.json"));
  ASSERT_GE(ref["cases"].size(), 30u);
  for (const auto& c : ref["cases"]) {
    const std::string name = c["template"];
    const std::string want = c["rendered"];
    SCOPED_TRACE(name + ": " + c["messages"].dump());
    const ChatTemplate t = parse_chat_template(name);
    const bool is_mistral = name.starts_with("mistral");
    const Tokenizer& tok = is_mistral ? mistral(name == "mistral" ? "v1" : "v3") : qwen3();
    const Conversation conv = conversation(c["messages"]);
    const bool generation = c["add_generation_prompt"];
    const auto pieces = render_template(t, conv, tok, generation);
    EXPECT_EQ(joined(pieces, tok, is_mistral), want);
    if (is_mistral) continue;
    // HF tokenizes the rendered string whole; loft encodes piece by piece.
    const auto ex = data::tokenize_conversation(conv, t, tok, false, generation);
    EXPECT_EQ(ex.ids, tok.encode(want));
  }
}

// mistral-common's tokens for a four-turn chat (its tests/data/samples/no_tools), with the
// tokenizer v1 (Mistral 7B Instruct v0.1/v0.2) and v3 (v0.3) models.
TEST(ChatTemplatesReal, MistralIdsAreMistralCommons) {
  const std::filesystem::path dir = test::data_path("reference/mistral_common_no_tools");
  const Conversation conv = conversation(test::read_json(dir / "sample.json")["messages"]);
  for (const auto& [version, t] : {std::pair{"v1", ChatTemplate::mistral}, std::pair{"v3", ChatTemplate::mistral_v3}}) {
    SCOPED_TRACE(version);
    const auto want = test::read_json(dir / cat("tokens_", version, ".json"))["tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(data::tokenize_conversation(conv, t, mistral(version), false).ids, want);
  }
  EXPECT_EQ(mistral("v3").special_id("[INST]"), 3);
  EXPECT_EQ(mistral("v3").special_id("[/INST]"), 4);
  EXPECT_EQ(mistral("v1").special_id("[INST]"), -1) << "plain text in tokenizer v1";
}

TEST(ChatTemplatesReal, QwenEndsTurnsWithImEnd) {
  const Tokenizer& tok = qwen3();
  for (ChatTemplate t : {ChatTemplate::qwen25, ChatTemplate::qwen3, ChatTemplate::qwen3_no_thinking})
    EXPECT_EQ(end_of_turn_id(t, tok), 151645) << chat_template_name(t);
  const Conversation conv{{{Role::user, "2+2?", {}}, {Role::assistant, "<think>\nadd\n</think>\n\n4", {}}}};
  const auto ex = data::tokenize_conversation(conv, ChatTemplate::qwen3, tok, false);
  // The thinking block, the answer and <|im_end|> are trained; the prompt and the final "\n" not.
  std::vector<int32_t> trained;
  for (size_t i = 0; i < ex.ids.size(); ++i)
    if (ex.trained[i]) trained.push_back(ex.ids[i]);
  EXPECT_EQ(tok.decode(trained), "<think>\nadd\n</think>\n\n4<|im_end|>");
}

TEST(ChatTemplatesReal, DetectedFromTheRealTemplates) {
  const auto config = test::read_json(test::data_path("tokenizers/qwen3/tokenizer_config.json"));
  EXPECT_EQ(detect_chat_template(config, "qwen3").family, ChatTemplate::qwen3);
  const auto file = [](const char* name) {
    std::ifstream in(test::data_path(cat("reference/chat_templates/", name)));
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(chat_template_family(file("Qwen-Qwen2.5-7B-Instruct.jinja")), ChatTemplate::qwen25);
  EXPECT_EQ(chat_template_family(file("mistralai-Mistral-7B-Instruct-v0.2.jinja")), ChatTemplate::mistral);
  EXPECT_EQ(chat_template_family(file("mistralai-v3.jinja")), ChatTemplate::mistral_v3);
}

}  // namespace
}  // namespace loft
