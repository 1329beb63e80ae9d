// Record formats: detection, normalisation into a Conversation, and bad records.
#include <gtest/gtest.h>

#include "datasets/record.h"
#include "engine/core/error.h"

namespace loft::data {
namespace {

using nlohmann::json;

std::string reason(const std::function<void()>& f) {
  try {
    f();
  } catch (const BadRecord& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Records, DetectsEachFormatFromItsKeys) {
  EXPECT_EQ(detect_format(json::parse(R"({"instruction":"i","input":"","output":"o"})")), RecordFormat::alpaca);
  EXPECT_EQ(detect_format(json::parse(R"({"instruction":"i","output":"o","text":"t"})")), RecordFormat::alpaca);
  EXPECT_EQ(detect_format(json::parse(R"({"messages":[]})")), RecordFormat::messages);
  EXPECT_EQ(detect_format(json::parse(R"({"conversations":[]})")), RecordFormat::sharegpt);
  EXPECT_EQ(detect_format(json::parse(R"({"prompt":"p","completion":"c"})")), RecordFormat::prompt_completion);
  EXPECT_EQ(detect_format(json::parse(R"({"question":"q","answer":"a"})")), RecordFormat::gsm8k);
  EXPECT_EQ(detect_format(json::parse(R"({"text":"t"})")), RecordFormat::text);
  EXPECT_EQ(detect_format(json::parse(R"({"foo":"t"})")), std::nullopt);
  EXPECT_EQ(detect_format(json::parse(R"([1])")), std::nullopt);
}

TEST(Records, FormatNamesRoundTripAndUnknownNamesAreUsageErrors) {
  for (auto f : {RecordFormat::alpaca, RecordFormat::messages, RecordFormat::sharegpt,
                 RecordFormat::prompt_completion, RecordFormat::text, RecordFormat::gsm8k})
    EXPECT_EQ(parse_record_format(record_format_name(f)), f);
  EXPECT_THROW(parse_record_format("csv"), UsageError);
}

TEST(Records, NormalisesEveryFormat) {
  Conversation c = to_conversation(json::parse(R"({"instruction":"I","input":"X","output":"O"})"), RecordFormat::alpaca);
  ASSERT_EQ(c.turns.size(), 2u);
  EXPECT_EQ(c.turns[0].role, Role::user);
  EXPECT_EQ(c.turns[0].text, "I");
  EXPECT_EQ(c.turns[0].input, "X");
  EXPECT_EQ(c.turns[1].role, Role::assistant);
  EXPECT_EQ(c.turns[1].text, "O");
  // Alpaca's input may be missing.
  EXPECT_EQ(to_conversation(json::parse(R"({"instruction":"I","output":"O"})"), RecordFormat::alpaca).turns[0].input, "");

  c = to_conversation(json::parse(R"({"messages":[{"role":"system","content":"S"},{"role":"user","content":"U"},
      {"role":"assistant","content":"A"},{"role":"user","content":"U2"},{"role":"assistant","content":"A2"}]})"),
                      RecordFormat::messages);
  ASSERT_EQ(c.turns.size(), 5u);
  EXPECT_EQ(c.turns[0].role, Role::system);
  EXPECT_EQ(c.turns[4].text, "A2");

  c = to_conversation(json::parse(R"({"conversations":[{"from":"human","value":"H"},{"from":"gpt","value":"G"}]})"),
                      RecordFormat::sharegpt);
  EXPECT_EQ(c.turns[0].role, Role::user);
  EXPECT_EQ(c.turns[1].role, Role::assistant);
  EXPECT_EQ(c.turns[1].text, "G");

  c = to_conversation(json::parse(R"({"prompt":"P","completion":"C"})"), RecordFormat::prompt_completion);
  EXPECT_EQ(c.turns[0].text + c.turns[1].text, "PC");
  c = to_conversation(json::parse(R"({"question":"Q","answer":"A\n#### 4"})"), RecordFormat::gsm8k);
  EXPECT_EQ(c.turns[1].text, "A\n#### 4");
  c = to_conversation(json::parse(R"({"text":"T"})"), RecordFormat::text);
  ASSERT_EQ(c.turns.size(), 1u);
  EXPECT_EQ(c.turns[0].role, Role::assistant);
  // Empty strings are valid records.
  c = to_conversation(json::parse(R"({"instruction":"","input":"","output":""})"), RecordFormat::alpaca);
  EXPECT_EQ(c.turns[1].text, "");
}

TEST(Records, BadRecordsSayWhatIsWrong) {
  EXPECT_EQ(reason([] { parse_json_record("{\"a\": "); }).rfind("invalid JSON: ", 0), 0u);
  EXPECT_EQ(reason([] { to_conversation(json::parse(R"({"instruction":"i"})"), RecordFormat::alpaca); }),
            "missing field 'output'");
  EXPECT_EQ(reason([] { to_conversation(json::parse(R"({"instruction":"i","output":3})"), RecordFormat::alpaca); }),
            "field 'output' must be a string, not number");
  EXPECT_EQ(reason([] { to_conversation(json::parse(R"({"messages":{}})"), RecordFormat::messages); }),
            "field 'messages' must be an array, not object");
  EXPECT_EQ(reason([] {
              to_conversation(json::parse(R"({"messages":[{"role":"tool","content":"x"}]})"), RecordFormat::messages);
            }),
            "messages[0]: unknown role 'tool' (expected system, user or assistant)");
  EXPECT_EQ(reason([] { to_conversation(json::parse(R"({"messages":[{"role":"user"}]})"), RecordFormat::messages); }),
            "messages[0]: missing field 'content'");
  EXPECT_EQ(reason([] { to_conversation(json::parse("[1,2]"), RecordFormat::alpaca); }),
            "record must be a JSON object, not array");
  // Invalid UTF-8 inside a JSON string, and in a text record.
  EXPECT_NE(reason([] { parse_json_record("{\"text\": \"a\xff\xfe\"}"); }).find("invalid JSON"), std::string::npos);
  EXPECT_EQ(reason([] { text_conversation("ok \xC3\x28"); }), "invalid UTF-8 at byte 3 of the text");
}

TEST(Records, Utf8Validation) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("h\xC3\xA9llo \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("ab\x80"), 2u);                 // stray continuation byte
  EXPECT_EQ(find_invalid_utf8("\xC0\xAF"), 0u);               // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1u);          // UTF-16 surrogate
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);       // past U+10FFFF
  EXPECT_EQ(find_invalid_utf8("abc\xE6\x97"), 3u);            // cut short
}

}  // namespace
}  // namespace loft::data
