// The command's contract: usage errors, the atomic output folder (refused when present unless
// --overwrite; nothing left behind by a failed export), sharding with an index that loft reads
// back, the metadata carried over.
#include <fstream>

#include "engine/io/safetensors_checkpoint.h"
#include "export/export.h"
#include "tests/export/export_fixture.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

size_t entries(const fs::path& dir) {
  return size_t(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

TEST(ExportCli, UsageErrors) {
  test::TempDir dir;
  const std::string m = test::stories_dir().string(), out = (dir / "o").string();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--model", m, "--format", "int4", "--out", out},
           {"--model", m, "--format", "fp8", "--fp8-layout", "row", "--out", out},
           {"--model", m, "--format", "bf16", "--fp8-layout", "block", "--out", out},
           {"--model", m, "--format", "peft", "--out", out},
           {"--model", m, "--format", "bf16", "--max-shard-size", "lots", "--out", out},
           {"--model", m, "--format", "bf16", "--method", "qlora", "--out", out}}) {
    std::vector<std::string> a{"export"};
    a.insert(a.end(), args.begin(), args.end());
    const auto r = test::run_cli_captured(a);
    EXPECT_EQ(r.code, 2) << args[3] << ": " << r.err;
  }
  EXPECT_EQ(entries(dir.path()), 0u) << "no folder, no temporary";
}

// An existing --out is refused; --overwrite replaces only a previous loft export, never a folder
// of other files (tests/robustness/test_export_paths.cpp plants files all around).
TEST(ExportCli, ExistingOutIsRefusedUnlessOverwrite) {
  test::TempDir dir;
  fs::create_directory(dir / "o");
  std::ofstream(dir / "o" / "keep.txt") << "x";
  const std::vector<std::string> args{"export", "--model", test::stories_dir().string(), "--format", "bf16",
                                      "--out", (dir / "o").string()};
  auto r = test::run_cli_captured(args);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--overwrite"), std::string::npos) << r.err;
  auto with = args;
  with.push_back("--overwrite");
  r = test::run_cli_captured(with);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is not a loft export"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir / "o" / "keep.txt"));
  fs::remove_all(dir / "o");
  ASSERT_EQ(test::run_cli_captured(args).code, 0);
  std::ofstream(dir / "o" / "stale.txt") << "inside the earlier export";
  r = test::run_cli_captured(with);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir / "o" / "stale.txt"));
  EXPECT_TRUE(fs::exists(dir / "o" / "model.safetensors"));
  EXPECT_EQ(entries(dir.path()), 1u) << "the old folder and the temporary are gone";
}

TEST(ExportCli, FailedExportLeavesNothing) {
  LOFT_REQUIRE_DATA("models/wide-random");
  test::TempDir dir;
  // An adapter of another model: its modules do not fit, found before anything is written.
  test::train_adapter("lora", test::stories_dir(), dir / "a", 1);
  const auto r = test::run_cli_captured({"export", "--model", test::data_path("models/wide-random").string(),
                                         "--adapter", (dir / "a").string(), "--format", "bf16",
                                         "--out", (dir / "o").string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("adapter"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "o"));
  EXPECT_EQ(entries(dir.path()), 1u) << "only the adapter: no temporary left";
}

TEST(ExportCli, ShardsWithAnIndexThatLoftReads) {
  test::TempDir dir;
  test::train_adapter("lora", test::stories_dir(), dir / "a", 2);
  test::run_export({"--model", test::stories_dir().string(), "--adapter", (dir / "a").string(), "--format",
                    "bf16", "--max-shard-size", "60KB", "--out", (dir / "s").string()});
  test::run_export({"--model", test::stories_dir().string(), "--adapter", (dir / "a").string(), "--format",
                    "bf16", "--out", (dir / "one").string()});
  ASSERT_TRUE(fs::exists(dir / "s" / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir / "s" / "model.safetensors"));
  const SafetensorsCheckpoint ck = SafetensorsCheckpoint::open(dir / "s");
  EXPECT_GT(ck.files().size(), 2u);
  char first[64];
  std::snprintf(first, sizeof first, "model-00001-of-%05zu.safetensors", ck.files().size());
  EXPECT_TRUE(fs::exists(dir / "s" / first)) << first;
  const SafetensorsCheckpoint one = SafetensorsCheckpoint::open(dir / "one");
  EXPECT_EQ(ck.names(), one.names());
  for (const std::string& n : one.names())
    EXPECT_EQ(ck.tensor(n).to_float_vector(), one.tensor(n).to_float_vector()) << n;
  EXPECT_EQ(test::evaluate_nll(dir / "s"), test::evaluate_nll(dir / "one"));
  // finetune's generation_config.json (the trained stop ids) wins over the base's.
  EXPECT_TRUE(fs::exists(dir / "s" / "generation_config.json"));
}

}  // namespace
}  // namespace loft
