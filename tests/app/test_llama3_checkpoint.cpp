// The Llama-3-shaped checkpoint (tests/common/llama3_checkpoint.h) end to end on the CPU: it loads
// (tied and untied); `finetune` trains it on Alpaca and on chat data with the Llama 3 template
// auto-detected from tokenizer_config.json, and the loss falls; `data inspect` shows the headers
// and the trained <|eot_id|>; `loft info` shows the tokenizer, template and stop ids. All but the
// first need the BPE tokenizer (tokenizer.json) and skip without it.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/io/safetensors_checkpoint.h"
#include "engine/peft/frozen_linear.h"
#include "models/llama/bench_model.h"
#include "models/llama/loading.h"
#include "tests/common/cli_capture.h"
#include "tests/common/llama3_checkpoint.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(Llama3Checkpoint, LoadsTiedAndUntied) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    test::TempDir dir;
    const llama::LlamaConfig cfg = test::write_llama3_checkpoint(dir.path(), {.tied = tied});
    const llama::LlamaConfig read = llama::load_llama_config(dir.path());
    EXPECT_EQ(read.vocab_size, 128256);
    EXPECT_EQ(read.num_kv_heads, 2);
    EXPECT_EQ(read.head_dim, 16);
    EXPECT_EQ(read.rope_theta, 500000.0);
    EXPECT_EQ(read.rope_scaling.type, "llama3");
    EXPECT_EQ(read.rope_scaling.factor, 8.0);
    EXPECT_EQ(read.rope_scaling.original_max_position_embeddings, 8192);
    EXPECT_EQ(read.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
    EXPECT_EQ(read.tie_word_embeddings, tied);
    const auto ck = SafetensorsCheckpoint::open(dir.path());
    EXPECT_EQ(ck.parameter_count(), llama::llama_parameter_count(cfg));
    EXPECT_EQ(ck.dtypes(), std::vector<DType>{DType::BF16});
    auto model = llama::load_model(dir.path(), Device::cpu(), [](const std::string&, const std::string&, Tensor w) {
      return std::make_unique<FrozenLinear>(std::move(w));
    });
    // Random weights: near uniform over the 128,256 tokens (logits spread ~0.8 at init_std 0.1,
    // which adds about σ²/2 ≈ 0.3 to ln(vocab)).
    std::vector<int32_t> ids = {128000, 9906, 1917, 128009, 271, 13347, 220, 882};
    const LossSums s = model->evaluate(make_batch(ids, ids, {}, 1, int64_t(ids.size()), Device::cpu()));
    EXPECT_NEAR(s.loss_sum / double(s.tokens), std::log(128256.0) + 0.3, 0.5);
  }
}

std::vector<std::string> finetune_args(const fs::path& model, const fs::path& data, const fs::path& out) {
  return {"finetune", "--model", model.string(), "--data", data.string(), "--out", out.string(),
          "--steps", "10", "--batch", "2", "--seq", "128", "--lr", "2e-2", "--schedule", "constant",
          "--warmup", "0", "--lora-rank", "8", "--device", "cpu", "--seed", "3"};
}

// Mean loss of the first and of the last `n` logged steps.
std::pair<double, double> first_last_loss(const fs::path& run, size_t n = 3) {
  const auto m = test::read_jsonl(run / "metrics.jsonl");
  EXPECT_GE(m.size(), 2 * n);
  double first = 0, last = 0;
  for (size_t i = 0; i < n && i < m.size(); ++i) {
    first += m[i]["loss"].get<double>() / double(n);
    last += m[m.size() - 1 - i]["loss"].get<double>() / double(n);
  }
  return {first, last};
}

void expect_llama3_adapter_stops(const fs::path& run) {
  std::ifstream f(run / "adapter" / "generation_config.json");
  const json g = json::parse(f);
  EXPECT_EQ(g["eos_token_id"], json({128001, 128008, 128009}));
  EXPECT_EQ(g["bos_token_id"], 128000);
  EXPECT_EQ(g["temperature"], 0.6);
}

TEST(Llama3Checkpoint, FinetunesOnAlpaca) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  test::TempDir dir;
  test::write_llama3_checkpoint(dir / "model", {.tied = false});
  const auto r = test::run_cli_captured(
      finetune_args(dir / "model", test::data_path("alpaca/alpaca_tiny.json"), dir / "run"));
  ASSERT_EQ(r.code, 0) << r.err;
  // The instruction becomes the user turn of the model's own (auto-detected) chat template.
  EXPECT_TRUE(test::contains(r.out, "alpaca, template llama3 (auto-detected"));
  EXPECT_TRUE(test::contains(r.out, "stop ids   128001 128008 128009\n"));
  const auto [first, last] = first_last_loss(dir / "run");
  EXPECT_LT(last, first - 0.2) << "loss did not fall: " << first << " -> " << last;
  expect_llama3_adapter_stops(dir / "run");
}

fs::path write_chats(const fs::path& file) {
  std::ofstream f(file);
  for (const char* animal : {"cat", "dog"})
    f << json{{"messages",
               {{{"role", "system"}, {"content", std::string("You are a ") + animal + "."}},
                {{"role", "user"}, {"content", "Say hello."}},
                {{"role", "assistant"}, {"content", std::string("Hello from the ") + animal + "!"}}}}}
             .dump()
      << '\n';
  return file;
}

TEST(Llama3Checkpoint, FinetunesOnChatsWithTheDetectedTemplate) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  test::TempDir dir;
  test::write_llama3_checkpoint(dir / "model", {.tied = true});
  const auto r = test::run_cli_captured(finetune_args(dir / "model", write_chats(dir / "chats.jsonl"), dir / "run"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "messages, template llama3 (auto-detected"));
  const auto [first, last] = first_last_loss(dir / "run");
  EXPECT_LT(last, first - 0.2) << "loss did not fall: " << first << " -> " << last;
  expect_llama3_adapter_stops(dir / "run");
  std::ifstream run_config_file(dir / "run" / "run_config.json");
  const json run_config = json::parse(run_config_file);
  EXPECT_EQ(run_config["stop_ids"], json({128001, 128008, 128009}));
}

TEST(Llama3Checkpoint, DataInspectShowsHeadersAndTrainedEot) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  test::TempDir dir;
  test::write_llama3_checkpoint(dir / "model");
  const auto r = test::run_cli_captured(
      {"data", "inspect", write_chats(dir / "chats.jsonl").string(), "--model", (dir / "model").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "(format messages, template llama3 auto-detected"));
  EXPECT_TRUE(test::contains(r.out,
                             "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a cat.<|eot_id|>"
                             "<|start_header_id|>user<|end_header_id|>\n\nSay hello.<|eot_id|>"
                             "<|start_header_id|>assistant<|end_header_id|>\n\n[[Hello from the cat!<|eot_id|>]]"));
  // --template overrides the detected one.
  const auto o = test::run_cli_captured({"data", "inspect", (dir / "chats.jsonl").string(), "--model",
                                         (dir / "model").string(), "--template", "llama3.1"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(test::contains(o.out, "(format messages, template llama3.1)"));
  EXPECT_TRUE(test::contains(o.out, "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are a cat."));
}

TEST(Llama3Checkpoint, InfoShowsTokenizerTemplateAndStopIds) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  test::TempDir dir;
  test::write_llama3_checkpoint(dir.path());
  auto r = test::run_cli_captured({"info", "--model", dir.path().string(), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["tokenizer"]["kind"], "bpe byte-level");
  EXPECT_EQ(j["tokenizer"]["vocab_size"], 128256);
  EXPECT_EQ(j["tokenizer"]["bos"], (json{{"id", 128000}, {"text", "<|begin_of_text|>"}}));
  EXPECT_EQ(j["tokenizer"]["eos"], (json{{"id", 128009}, {"text", "<|eot_id|>"}}));
  EXPECT_TRUE(j["tokenizer"]["adds_bos"].is_boolean());
  EXPECT_EQ(j["tokenizer"]["special_tokens"]["count"], 256);
  EXPECT_EQ(j["tokenizer"]["special_tokens"]["tokens"].size(), 256u);
  EXPECT_EQ(j["chat_template"]["name"], "llama3");
  EXPECT_EQ(j["chat_template"]["auto_detected"], true);
  // 128008 is Llama 3.1's <|eom_id|>; the Llama 3 tokenizer.json here still calls it reserved.
  EXPECT_EQ(j["stop_ids"], json::parse(R"([
      {"id": 128001, "text": "<|end_of_text|>", "from": "generation_config.json"},
      {"id": 128008, "text": "<|reserved_special_token_4|>", "from": "generation_config.json"},
      {"id": 128009, "text": "<|eot_id|>", "from": "generation_config.json"}])"));
  EXPECT_EQ(j["generation_config"]["top_p"], 0.9);
  r = test::run_cli_captured({"info", "--model", dir.path().string()});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* part : {"tokenizer     bpe byte-level, vocab 128256", "special       256 tokens: ",
                           "chat template llama3 (auto-detected from tokenizer_config.json chat_template)",
                           "128001 <|end_of_text|> (generation_config.json)", "128009 <|eot_id|>",
                           "temperature 0.6", "vocab 128256"})
    EXPECT_TRUE(test::contains(r.out, part));
}

}  // namespace
}  // namespace loft
