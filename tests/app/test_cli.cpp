// The CLI contract: exit codes (2 usage, 1 runtime), --version, --config, --device.
#include <fstream>

#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

using Result = test::CliResult;
Result run(std::vector<std::string> args) { return test::run_cli_captured(std::move(args)); }

TEST(Cli, VersionPrintsAndExitsZero) {
  Result r = run({"--version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("loft "), std::string::npos);
}

TEST(Cli, UnknownOptionIsUsageError) {
  Result r = run({"--no-such-root-option"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("loft: error:"), std::string::npos);
}

TEST(Cli, MissingSubcommandIsUsageError) {
  Result r = run({});
  EXPECT_EQ(r.code, 2);
}

TEST(Cli, FailedGgufExportsNameTheFolderAndLeaveNothing) {
  test::TempDir dir;
  for (const char* format : {"gguf", "gguf-lora"})
    for (const char* out : {"o", "o.gguf"}) {
      Result r = run({"export", "--model", "/nonexistent", "--adapter", "/nonexistent", "--format", format, "--out",
                      (dir / out).string()});
      EXPECT_EQ(r.code, 1) << format << " " << out;
      EXPECT_NE(r.err.find("/nonexistent"), std::string::npos) << r.err;
      EXPECT_TRUE(r.out.empty()) << "no fake output: " << r.out;
      EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << format << " " << out << ": nothing left behind";
    }
}

TEST(Cli, BadDeviceIsUsageErrorNamingTheValue) {
  Result r = run({"evaluate", "--model", "/nonexistent", "--device", "tpu:3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("tpu:3"), std::string::npos) << r.err;
}

TEST(Cli, CudaWithoutGpuIsClearError) {
  if (test::have_gpu()) GTEST_SKIP() << "a GPU is present";
  Result r = run({"evaluate", "--model", "/nonexistent", "--device", "cuda"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cuda"), std::string::npos) << r.err;
}

TEST(Cli, ConfigFileSuppliesOptions) {
  test::TempDir dir;
  std::ofstream(dir / "run.toml") << "[evaluate]\nmodel = \"/nonexistent\"\ndevice = \"bogus-device\"\n";
  Result r = run({"--config", (dir / "run.toml").string(), "evaluate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bogus-device"), std::string::npos) << r.err;
}

TEST(Cli, MissingConfigFileIsUsageError) {
  Result r = run({"--config", "/nonexistent/loft.toml", "evaluate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("loft.toml"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace loft
