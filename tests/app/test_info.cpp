// `loft info` through the real CLI: JSON fields against the loaders and the estimate, the text
// report, and exit codes for bad options and folders.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "engine/io/safetensors_writer.h"
#include "models/llama/memory_estimate.h"
#include "tests/app/cli_run.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

using test::CliResult;

CliResult run(std::vector<std::string> args) { return test::run_cli(std::move(args)); }

std::string model(const char* name) { return (test::data_dir() / "models" / name).string(); }

TEST(InfoCommand, JsonForWideRandom) {
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
                  m["logits_bytes"].get<int64_t>());
    EXPECT_EQ(m["adapter_bytes"].get<int64_t>(), 16 * m["adapter_parameters"].get<int64_t>());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"lora-bf16", "qlora-nf4", "falqon-fp8", "halo-fp8",
                                             "halo-int8", "halo-nf4"}));
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

TEST(InfoCommand, TextReport) {
  const auto r = run({"info", "--model", model("wide-random")});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* part : {"2 layers, hidden 512", "8 heads / 4 KV heads", "6,326,784", "BF16",
                           "rope theta 500000", "qlora-nf4", "falqon-fp8", "halo-nf4", "estimate"})
    EXPECT_TRUE(test::contains(r.out, part));
}

TEST(InfoCommand, BadInvocations) {
  EXPECT_EQ(run({"info"}).code, 2);  // --model is required
  auto r = run({"info", "--model", "/definitely/not/here"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::contains(r.err, "/definitely/not/here"));
  r = run({"info", "--model", model("wide-random"), "--batch", "0"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::contains(r.err, "--batch"));
  EXPECT_EQ(run({"info", "--model", model("wide-random"), "--lora-rank", "x"}).code, 2);

  // A folder with config.json but no weights: a runtime error naming the folder.
  test::TempDir dir;
  std::filesystem::copy_file(test::data_dir() / "models/stories260K-hf/config.json",
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
