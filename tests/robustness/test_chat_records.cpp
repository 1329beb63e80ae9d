// A chat record ending in an assistant turn: training trains that turn under every template (it
// is the normal case for training data), and generate --chat, which writes the assistant's next
// turn, refuses such a record by its line instead of dropping the turn unseen.
#include "tests/robustness/robustness_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using test::expect_failure;

const char* kChat =
    R"({"messages": [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"},)"
    R"( {"role": "user", "content": "Q2"}, {"role": "assistant", "content": "LAST"}]})" "\n";

TEST(Robustness, TheLastAssistantTurnIsTrained) {
  test::TempDir dir;
  test::write_file(dir / "chat.jsonl", kChat);
  for (const char* t : {"chatml", "llama3", "llama2", "alpaca", "plain"}) {
    const test::BinaryResult r = test::run_loft(
        {"data", "inspect", (dir / "chat.jsonl").string(), "--model", test::stories(), "--template", t});
    ASSERT_EQ(r.code, 0) << t << ": " << r.err;
    // Trained tokens are marked [[...]]: the final answer lies inside a marked span.
    const size_t last = r.out.find("LAST");
    ASSERT_NE(last, std::string::npos) << t << ": " << r.out;
    const size_t open = r.out.rfind("[[", last), closed = r.out.rfind("]]", last);
    ASSERT_NE(open, std::string::npos) << t << ": " << r.out;
    EXPECT_TRUE(closed == std::string::npos || closed < open) << t << ": " << r.out;
    EXPECT_NE(r.out.find("]]", last), std::string::npos) << t << ": " << r.out;
  }
}

TEST(Robustness, GenerateRefusesAChatThatEndsWithTheAssistant) {
  test::TempDir dir;
  const fs::path prompts = dir / "prompts.jsonl";
  test::write_file(prompts, std::string("\"Once\"\n") + kChat);
  expect_failure({"generate", "--model", test::stories(), "--prompts", prompts.string(), "--chat", "--max-new-tokens",
                  "2", "--device", "cpu"},
                 1, {prompts.string() + ":2", "ends with an assistant turn"});
  // An alpaca record's output is its reference answer: the instruction is the prompt.
  test::write_file(prompts, R"({"instruction": "Say hi", "input": "", "output": "hi"})" "\n");
  const test::BinaryResult ok = test::run_loft({"generate", "--model", test::stories(), "--prompts", prompts.string(),
                                                "--chat", "--max-new-tokens", "2", "--json", "--device", "cpu"});
  EXPECT_EQ(ok.code, 0) << ok.err;
}

}  // namespace
}  // namespace loft
