// Chat template families recognised from tokenizer_config.json by their markers: the real Llama 3
// configs, Llama 3.1's system block, ChatML, Llama 2, the list form, and files that say nothing.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/core/error.h"
#include "tests/common/test_util.h"
#include "tokenizer/chat_template_detect.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Fragments of the published templates, enough to carry each family's markers.
constexpr const char* kLlama31 =
    "{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
    "'<|eot_id|>' }}";
constexpr const char* kChatML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}";
constexpr const char* kLlama2 =
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}";
constexpr const char* kGemma = "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}";

fs::path llama3_dir() { return test::data_path("tokenizers/llama3"); }

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

TEST(ChatTemplateDetect, TheRealLlama3ConfigsAreLlama3) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  for (const char* file : {"tokenizer_config.json", "tokenizer_config.instruct.json"}) {
    const ChatTemplateDetection d = detect_chat_template(read_json(llama3_dir() / file), file);
    EXPECT_TRUE(d.has_chat_template) << file;
    EXPECT_EQ(d.family, ChatTemplate::llama3) << file;
    EXPECT_TRUE(d.entry.empty());
    EXPECT_TRUE(test::contains(d.summary(), "llama3 (auto-detected from tokenizer_config.json chat_template)"));
  }
}

TEST(ChatTemplateDetect, FamiliesByMarkers) {
  EXPECT_EQ(chat_template_family(kLlama31), ChatTemplate::llama31);
  EXPECT_EQ(chat_template_family(kChatML), ChatTemplate::chatml);
  EXPECT_EQ(chat_template_family(kLlama2), ChatTemplate::llama2);
  EXPECT_EQ(chat_template_family(kGemma), std::nullopt);
  EXPECT_EQ(chat_template_family(""), std::nullopt);
  const ChatTemplateDetection d = detect_chat_template(json{{"chat_template", kGemma}}, "x");
  EXPECT_TRUE(d.has_chat_template);
  EXPECT_FALSE(d.family);
  EXPECT_TRUE(test::contains(d.summary(), "of no family loft knows"));
}

TEST(ChatTemplateDetect, ListFormUsesTheDefaultEntry) {
  const json list = {{"chat_template",
                      {{{"name", "tool_use"}, {"template", kChatML}}, {{"name", "default"}, {"template", kLlama31}}}}};
  ChatTemplateDetection d = detect_chat_template(list, "x");
  EXPECT_EQ(d.entry, "default");
  EXPECT_EQ(d.family, ChatTemplate::llama31);
  EXPECT_TRUE(test::contains(d.summary(), "chat_template 'default'"));
  d = detect_chat_template(json{{"chat_template", {{{"name", "rag"}, {"template", kLlama2}}}}}, "x");
  EXPECT_EQ(d.entry, "rag");
  EXPECT_EQ(d.family, ChatTemplate::llama2);
  EXPECT_FALSE(detect_chat_template(json{{"chat_template", json::array()}}, "x").has_chat_template);
}

TEST(ChatTemplateDetect, AbsentOrMalformed) {
  EXPECT_FALSE(detect_chat_template(json{{"bos_token", "<s>"}}, "x").has_chat_template);
  EXPECT_FALSE(detect_chat_template(json{{"chat_template", nullptr}}, "x").has_chat_template);
  // stories260K-hf's tokenizer_config.json has none; a folder without the file has none.
  EXPECT_FALSE(detect_chat_template(test::data_path("models/stories260K-hf")).has_chat_template);
  test::TempDir dir;
  EXPECT_FALSE(detect_chat_template(dir.path()).has_chat_template);
  for (const json& bad : {json{{"chat_template", 5}}, json{{"chat_template", {{{"name", "default"}}}}}}) {
    try {
      detect_chat_template(bad, "DIR/tokenizer_config.json");
      ADD_FAILURE() << bad.dump();
    } catch (const Error& e) {
      EXPECT_TRUE(test::contains(e.what(), "DIR/tokenizer_config.json: field chat_template"));
    }
  }
  std::ofstream(dir / "tokenizer_config.json") << "{not json";
  try {
    detect_chat_template(dir.path());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "tokenizer_config.json: not valid JSON"));
  }
}

}  // namespace
}  // namespace loft
