// loft generate: --json over several prompts (batched) equals the streamed text (the decoder's
// own greedy tokens are checked against lm-eval in tests/models/test_generate.cpp and through
// evaluate --task gsm8k); --stop cuts and stops; EOS ends a sequence; bad input.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

using nlohmann::json;

std::string model_dir() { return test::data_path("models/stories260K-hf").string(); }

TEST(GenerateCmd, StreamedTextEqualsBatchedJson) {
  test::TempDir dir;
  // Streamed alone and decoded in a batch of two with --json: the same greedy text.
  const auto streamed = test::run_cli_captured({"generate", "--model", model_dir(), "--prompt", "Once upon a time",
                                                "--max-new-tokens", "40", "--device", "cpu"});
  ASSERT_EQ(streamed.code, 0) << streamed.err;
  std::ofstream(dir / "p.jsonl") << "{\"prompt\": \"Tim and Sue\"}\n\"Once upon a time\"\n";
  const auto batched = test::run_cli_captured({"generate", "--model", model_dir(), "--prompts",
                                               (dir / "p.jsonl").string(), "--max-new-tokens", "40", "--json",
                                               "--device", "cpu"});
  ASSERT_EQ(batched.code, 0) << batched.err;
  std::istringstream lines(batched.out);
  std::string l0, l1;
  std::getline(lines, l0);
  std::getline(lines, l1);
  const json j1 = json::parse(l1);
  EXPECT_EQ(j1["index"], 1);
  EXPECT_EQ(streamed.out, "Once upon a time" + j1["text"].get<std::string>() + "\n");
  EXPECT_EQ(j1["generated_tokens"], 40);
  EXPECT_EQ(j1["stop_reason"], "max_tokens");
}

TEST(GenerateCmd, StopStringCutsAndStops) {
  const auto all = test::run_cli_captured({"generate", "--model", model_dir(), "--prompt", "Once upon a time",
                                           "--max-new-tokens", "60", "--json", "--device", "cpu"});
  ASSERT_EQ(all.code, 0) << all.err;
  const std::string text = json::parse(all.out)["text"];
  // Stop at the second word of the generation.
  const size_t sp = text.find(' ', 1);
  ASSERT_NE(sp, std::string::npos);
  const std::string stop = text.substr(sp, 4);
  const auto cut = test::run_cli_captured({"generate", "--model", model_dir(), "--prompt", "Once upon a time",
                                           "--max-new-tokens", "60", "--stop", stop, "--json", "--device", "cpu"});
  ASSERT_EQ(cut.code, 0) << cut.err;
  const json j = json::parse(cut.out);
  EXPECT_EQ(j["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(j["stop_reason"], "stop");
  EXPECT_LT(j["generated_tokens"].get<int>(), 60);
  const auto streamed = test::run_cli_captured({"generate", "--model", model_dir(), "--prompt", "Once upon a time",
                                                "--max-new-tokens", "60", "--stop", stop, "--device", "cpu"});
  EXPECT_EQ(streamed.out, "Once upon a time" + j["text"].get<std::string>() + "\n");
}

TEST(GenerateCmd, ChatRendersTheTemplateAndPicksIt) {
  test::TempDir dir;
  // No chat template in the model folder: the tokenizer's markers (Llama 2's [INST]) as finetune
  // would use for chat records; a messages line keeps its turns, the system prompt opens it.
  std::ofstream(dir / "p.jsonl")
      << "\"Once upon a time\"\n"
      << R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},)"
      << R"( {"role": "user", "content": "A story"}]})" << "\n";
  auto r = test::run_cli_captured({"generate", "--model", model_dir(), "--prompts", (dir / "p.jsonl").string(),
                                   "--chat", "--system", "Be brief", "--max-new-tokens", "4", "--json", "--device", "cpu"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.err, "chat template llama2 (the tokenizer's chat markers)")) << r.err;
  std::istringstream lines(r.out);
  std::string l0, l1;
  std::getline(lines, l0);
  std::getline(lines, l1);
  EXPECT_EQ(json::parse(l0)["prompt"], "<s> [INST] <<SYS>>\nBe brief\n<</SYS>>\n\nOnce upon a time [/INST]");
  EXPECT_TRUE(test::contains(json::parse(l1)["prompt"].get<std::string>(), "Hello</s><s> [INST] A story [/INST]"))
      << l1;

  // An adapter whose run recorded its training template: that template, end-of-turn included.
  const auto run = dir / "run";
  std::filesystem::create_directories(run);
  std::filesystem::copy(test::data_path("golden/adapter_stories260K"), run / "adapter");
  std::ofstream(run / "run_config.json") << R"({"chat_template": "chatml"})";
  r = test::run_cli_captured({"generate", "--model", model_dir(), "--adapter", (run / "adapter").string(), "--prompt",
                              "hi", "--chat", "--max-new-tokens", "3", "--json", "--device", "cpu"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.err, "chat template chatml (the adapter's training run)")) << r.err;
  EXPECT_TRUE(test::contains(json::parse(r.out)["prompt"].get<std::string>(), "user\nhi")) << r.out;
  // --template wins over both.
  r = test::run_cli_captured({"generate", "--model", model_dir(), "--adapter", (run / "adapter").string(), "--prompt",
                              "hi", "--chat", "--template", "alpaca", "--max-new-tokens", "3", "--json", "--device", "cpu"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(json::parse(r.out)["prompt"].get<std::string>(), "### Instruction:\nhi")) << r.out;
}

TEST(GenerateCmd, ChatBadInputIsAClearError) {
  test::TempDir dir;
  auto r = test::run_cli_captured({"generate", "--model", model_dir(), "--prompt", "x", "--system", "s", "--device", "cpu"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::contains(r.err, "go with --chat")) << r.err;
  r = test::run_cli_captured({"generate", "--model", model_dir(), "--prompt", "x", "--chat", "--template", "jinja",
                              "--device", "cpu"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::contains(r.err, "--template")) << r.err;
  std::ofstream(dir / "p.jsonl") << R"({"messages": [{"role": "system", "content": "only a system turn"}]})" << "\n";
  r = test::run_cli_captured({"generate", "--model", model_dir(), "--prompts", (dir / "p.jsonl").string(), "--chat",
                              "--device", "cpu"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "p.jsonl:1: a chat prompt must end with a user turn")) << r.err;
  std::ofstream(dir / "q.jsonl") << R"({"messages": [{"role": "user", "content": "hi"}]})" << "\n";
  r = test::run_cli_captured({"generate", "--model", model_dir(), "--prompts", (dir / "q.jsonl").string(), "--device", "cpu"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "chat records need --chat")) << r.err;
}

TEST(GenerateCmd, BadInputIsAClearError) {
  auto r = test::run_cli_captured({"generate", "--model", model_dir(), "--device", "cpu"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::contains(r.err, "--prompt")) << r.err;
  r = test::run_cli_captured({"generate", "--model", model_dir(), "--prompt", "x", "--max-new-tokens", "600",
                              "--device", "cpu"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::contains(r.err, "context of 512")) << r.err;
  r = test::run_cli_captured({"generate", "--model", model_dir(), "--prompt", "x", "--top-p", "0", "--device", "cpu"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::contains(r.err, "--top-p: must be a number in (0, 1]")) << r.err;
  r = test::run_cli_captured({"generate", "--model", model_dir(), "--prompt", "x", "--slots", "-1", "--device", "cpu"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::contains(r.err, "--slots: must be an integer of at least 1")) << r.err;
}

}  // namespace
}  // namespace loft
