// finetune's data-parallel options (app/data_parallel_setup): --gpus parsing with errors that name
// the value, --gpus beside torchrun's variables or --device refused, and a build without NCCL
// saying so instead of starting a run that cannot sum its gradients.
#include <filesystem>
#include <gtest/gtest.h>

#include "app/data_parallel_setup.h"
#include "engine/parallel/nccl_comm.h"
#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"

namespace loft::app {
namespace {

std::string usage_error(const std::string& spec, int available) {
  try {
    parse_gpus(spec, available);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(DataParallelSetup, ParsesACountOrAList) {
  EXPECT_EQ(parse_gpus("1", 4), (std::vector<int>{0}));
  EXPECT_EQ(parse_gpus("3", 4), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(parse_gpus("2,0", 4), (std::vector<int>{2, 0}));
  EXPECT_EQ(parse_gpus("3,", 4), (std::vector<int>{3}));  // one chosen GPU
}

TEST(DataParallelSetup, NamesWhatIsWrongWithGpus) {
  EXPECT_NE(usage_error("5", 4).find("this machine has 4 GPUs"), std::string::npos);
  EXPECT_NE(usage_error("0", 4).find("at least one GPU"), std::string::npos);
  EXPECT_NE(usage_error("0,4", 4).find("there is no cuda:4"), std::string::npos);
  EXPECT_NE(usage_error("1,1", 4).find("cuda:1 is named twice"), std::string::npos);
  for (const char* bad : {"", "two", "-1", "1,,2", "1.5", "0,x", "99999"})
    EXPECT_NE(usage_error(bad, 4).find("expected a GPU count"), std::string::npos) << bad;
}

TEST(DataParallelSetup, NothingAskedIsTheOneDeviceRun) {
  EXPECT_FALSE(setup_data_parallel("", std::nullopt, std::chrono::seconds(1)).active());
  EXPECT_TRUE(setup_data_parallel("", std::nullopt, std::chrono::seconds(1)).writes());
}

TEST(DataParallelSetup, GpusAndTorchrunTogetherAreRefused) {
  parallel::LaunchEnv env{"127.0.0.1", 29500, 2, 0, 0};
  try {
    setup_data_parallel("2", env, std::chrono::seconds(1));
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("WORLD_SIZE=2"), std::string::npos) << e.what();
  }
}

TEST(DataParallelSetup, ABuildWithoutNcclSaysSo) {
  if (nccl_compiled()) GTEST_SKIP() << "this build has NCCL (tests/gpu cover data parallelism)";
  try {
    setup_data_parallel("1", std::nullopt, std::chrono::seconds(1));
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("without it"), std::string::npos) << e.what();
  }
}

TEST(DataParallelSetup, FinetuneRefusesGpusWithADevice) {
  const test::CliResult r = test::run_cli_captured(
      {"finetune", "--model", test::data_path("models/stories260K-hf").string(), "--data",
       "x.jsonl", "--gpus", "2", "--device", "cpu", "--out", "/nonexistent/run"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--device cpu with --gpus 2"), std::string::npos) << r.err;
}

// --shard-backbone spreads the codes over data-parallel ranks: alone it is refused before the run
// folder is touched.
TEST(DataParallelSetup, FinetuneRefusesShardBackboneWithoutRanks) {
  const test::CliResult r = test::run_cli_captured(
      {"finetune", "--model", test::data_path("models/stories260K-hf").string(), "--data",
       "x.jsonl", "--shard-backbone", "--out", "/nonexistent/run"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--shard-backbone"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--gpus"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists("/nonexistent/run"));
}

}  // namespace
}  // namespace loft::app
