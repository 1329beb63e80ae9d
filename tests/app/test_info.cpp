// `loft info` through the real CLI: JSON fields against the loaders and the estimate, the text
// report, and exit codes for bad options and folders.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/common/cli_capture.h"
#include "engine/io/safetensors_writer.h"
#include "models/llama/memory_estimate.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

using test::CliResult;
CliResult run(std::vector<std::string> args) { return test::run_cli_captured(std::move(args)); }

std::string model(const char* name) { return test::data_path(std::string("models/") + name).string(); }

TEST(InfoCommand, JsonForWideRandom) {
  LOFT_REQUIRE_DATA("models/wide-random");
  const auto r = run({"info", "--model", model("wide-random"), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);  // exactly one JSON object, nothing else
  EXPECT_EQ(j["parameters"], 6326784);
  EXPECT_EQ(j["layers"], 2);
  EXPECT_EQ(j["hidden_size"], 512);
  EXPECT_EQ(j["intermediate_size"], 1376);
  EXPECT_EQ(j["num_key_value_heads"], 4);
  EXPECT_EQ(j["vocab_size"], 512);
  EXPECT_EQ(j["tie_word_embeddings"], false);
  EXPECT_EQ(j["rope_theta"], 500000.0);
  EXPECT_EQ(j["files"], 2);
  EXPECT_EQ(j["dtypes_on_disk"], nlohmann::json::array({"BF16"}));
  const auto& est = j["memory_estimate"];
  EXPECT_EQ(est["batch"], 1);
  EXPECT_EQ(est["seq"], 512);
  EXPECT_EQ(est["lora_rank"], 64);
  std::vector<std::string> names;
  for (const auto& m : est["methods"]) {
    names.push_back(m["method"]);
    EXPECT_EQ(m["total_bytes"].get<int64_t>(),
              m["frozen_weights_bytes"].get<int64_t>() + m["embeddings_bytes"].get<int64_t>() +
                  m["adapter_bytes"].get<int64_t>() + m["activations_bytes"].get<int64_t>() +
                  m["working_bytes"].get<int64_t>());
    // 16 B/param (fp32 value, grad, AdamW m, v) + the method's copies or state.
    EXPECT_GE(m["adapter_bytes"].get<int64_t>(), 16 * m["adapter_parameters"].get<int64_t>());
    EXPECT_LE(m["adapter_bytes"].get<int64_t>(), 20 * m["adapter_parameters"].get<int64_t>());
    EXPECT_GT(m["host_embeddings_bytes"].get<int64_t>(), 0);  // untied: the input table on the host
  }
  EXPECT_EQ(names, (std::vector<std::string>{"lora-bf16", "qlora-nf4", "falqon-fp8", "falqon-fp8-kept", "halo-fp8",
                                             "halo-fp8-kept", "halo-int8", "halo-nf4", "hot-dense", "hot-fp8", "hot-nf4"}));
}

TEST(InfoCommand, JsonOptionsReachTheEstimate) {
  const auto r = run({"info", "--model", model("stories260K-hf"), "--json", "--batch", "3", "--seq",
                      "100", "--lora-rank", "8"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tie_word_embeddings"], true);
  EXPECT_EQ(j["dtypes_on_disk"], nlohmann::json::array({"F32"}));
  // 512·64 embedding + final norm + 5 layers of (2 norms + projections).
  EXPECT_EQ(j["parameters"],
            512 * 64 + 64 + 5 * (2 * 64 + 2 * 64 * 64 + 2 * 32 * 64 + 3 * 172 * 64));
  const auto cfg = llama::load_llama_config(model("stories260K-hf"));
  const auto want = llama::estimate_training_memory(cfg, {.batch = 3, .seq = 100, .lora_rank = 8});
  const auto& got = j["memory_estimate"]["methods"];
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i]["method"], want[i].method);
    EXPECT_EQ(got[i]["activations_bytes"], want[i].activations);
    EXPECT_EQ(got[i]["frozen_weights_bytes"], want[i].frozen_weights);
    EXPECT_EQ(got[i]["total_bytes"], want[i].total());
  }
}

// --grad-checkpointing and --estimate-for reach the estimate.
TEST(InfoCommand, CheckpointingAndDeviceReachTheEstimate) {
  LOFT_REQUIRE_DATA("models/wide-random");
  const auto r = run({"info", "--model", model("wide-random"), "--json", "--batch", "4", "--seq",
                      "256", "--grad-checkpointing", "--estimate-for", "cpu"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["memory_estimate"]["activation_checkpointing"], true);
  EXPECT_EQ(j["memory_estimate"]["device"], "cpu");
  const auto cfg = llama::load_llama_config(model("wide-random"));
  const auto want = llama::estimate_training_memory(
      cfg, {.batch = 4, .seq = 256, .lora_rank = 64, .grad_checkpointing = true, .gpu = false});
  const auto& got = j["memory_estimate"]["methods"];
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i]["activations_bytes"], want[i].activations);
    EXPECT_EQ(got[i]["working_bytes"], want[i].working);
    EXPECT_EQ(got[i]["total_bytes"], want[i].total());
  }
  EXPECT_NE(run({"info", "--model", model("wide-random"), "--estimate-for", "tpu"}).code, 0);
}

TEST(InfoCommand, TextReport) {
  LOFT_REQUIRE_DATA("models/wide-random");
  const auto r = run({"info", "--model", model("wide-random")});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* part : {"2 layers, hidden 512", "8 heads / 4 KV heads", "6,326,784", "BF16",
                           "rope theta 500000", "qlora-nf4", "falqon-fp8", "halo-nf4", "estimate"})
    EXPECT_TRUE(test::contains(r.out, part));
}

// The tokenizer part: stories260K-hf has no chat_template, and every file says EOS 2.
TEST(InfoCommand, TokenizerTemplateAndStopIds) {
  auto r = run({"info", "--model", model("stories260K-hf"), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& t = j["tokenizer"];
  EXPECT_FALSE(t["kind"].get<std::string>().empty());
  EXPECT_EQ(t["vocab_size"], 512);
  EXPECT_EQ(t["bos"], (nlohmann::json{{"id", 1}, {"text", "<s>"}}));
  EXPECT_EQ(t["eos"], (nlohmann::json{{"id", 2}, {"text", "</s>"}}));
  EXPECT_EQ(t["adds_bos"], true);
  EXPECT_EQ(t["special_tokens"]["count"], t["special_tokens"]["tokens"].size());
  EXPECT_GE(t["special_tokens"]["count"].get<int>(), 2);
  EXPECT_EQ(j["chat_template"]["name"], "llama2");  // no header or ChatML tokens: [INST]
  EXPECT_EQ(j["chat_template"]["auto_detected"], false);
  EXPECT_EQ(j["chat_template"]["has_chat_template"], false);
  EXPECT_EQ(j["stop_ids"], nlohmann::json::parse(R"([{"id": 2, "text": "</s>", "from": "generation_config.json"}])"));
  EXPECT_EQ(j["generation_config"], nlohmann::json::parse(R"({"bos_token_id": 1, "eos_token_id": 2})"));
  r = run({"info", "--model", model("stories260K-hf")});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* part : {"tokenizer     ", "vocab 512; BOS <s> (1), added by default; EOS </s> (2)", "special       ",
                           "chat template llama2 for chat data, from the tokenizer's special tokens "
                           "(tokenizer_config.json has no chat_template)",
                           "stop ids      2 </s> (generation_config.json)"})
    EXPECT_TRUE(test::contains(r.out, part));
}

// A stop id outside the vocabulary is a runtime error naming the file and field.
TEST(InfoCommand, BadGenerationConfig) {
  test::TempDir dir;
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model"})
    std::filesystem::copy_file(test::data_path("models/stories260K-hf") / f, dir / f);
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [2, 9999]})";
  const auto r = run({"info", "--model", dir.path().string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "generation_config.json: field eos_token_id: token id 9999 is outside the vocabulary"));
}

TEST(InfoCommand, BadInvocations) {
  EXPECT_EQ(run({"info"}).code, 2);  // --model is required
  auto r = run({"info", "--model", "/definitely/not/here"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::contains(r.err, "/definitely/not/here"));
  r = run({"info", "--model", model("stories260K-hf"), "--batch", "0"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::contains(r.err, "--batch"));
  EXPECT_EQ(run({"info", "--model", model("stories260K-hf"), "--lora-rank", "x"}).code, 2);

  // A folder with config.json but no weights: a runtime error naming the folder.
  test::TempDir dir;
  std::filesystem::copy_file(test::data_path("models/stories260K-hf/config.json"),
                             dir / "config.json");
  r = run({"info", "--model", dir.path().string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "no model.safetensors"));
  EXPECT_TRUE(r.out.empty());
  // And one without config.json.
  std::filesystem::remove(dir / "config.json");
  write_safetensors(dir / "model.safetensors", {});
  r = run({"info", "--model", dir.path().string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "config.json"));
}

}  // namespace
}  // namespace loft
