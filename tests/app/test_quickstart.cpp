// The README's quick start, run as written: its command after `scripts/setup.sh &&` uses only
// files shipped in examples/, so a fresh clone with no ../shared beside it can run it. The test
// reads the command from README.md (so the two cannot drift apart), runs the real binary in an
// empty folder that holds only a link to examples/, and checks the loss falls and an adapter is
// written.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/peft/peft_adapter.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = test::source_dir();

// The quick-start command: the README line that starts with "scripts/setup.sh && ".
std::string quickstart_command() {
  std::ifstream f(kRoot / "README.md");
  const std::string prefix = "scripts/setup.sh && ";
  for (std::string line; std::getline(f, line);)
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  return {};
}

TEST(QuickStart, ReadmeCommandTrainsTheShippedModelAndWritesAnAdapter) {
  std::string cmd = quickstart_command();
  ASSERT_FALSE(cmd.empty()) << "README.md has no 'scripts/setup.sh && ...' line";
  ASSERT_EQ(cmd.rfind("build/loft ", 0), 0u) << cmd;
  EXPECT_EQ(cmd.find("shared"), std::string::npos) << "the quick start must not need ../shared: " << cmd;
  cmd.replace(0, std::string("build/loft").size(), test::loft_binary());

  test::TempDir dir;
  fs::create_directory_symlink(kRoot / "examples", dir / "examples");
  const std::string log = (dir / "log.txt").string();
  const int status = std::system(("cd '" + dir.path().string() + "' && " + cmd + " > '" + log + "' 2>&1").c_str());
  std::ifstream lf(log);
  std::stringstream output;
  output << lf.rdbuf();
  ASSERT_EQ(status, 0) << cmd << "\n" << output.str();

  const fs::path run = dir / "runs" / "latest";
  std::ifstream mf(run / "metrics.jsonl");
  std::vector<double> losses;
  for (std::string line; std::getline(mf, line);)
    if (!line.empty()) losses.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  ASSERT_GE(losses.size(), 10u) << output.str();
  // "Visibly falls": the last steps' mean is under a third of the first step's loss.
  const double tail = (losses[losses.size() - 1] + losses[losses.size() - 2] + losses[losses.size() - 3]) / 3;
  EXPECT_LT(tail, losses.front() / 3) << losses.front() << " -> " << tail;
  EXPECT_NO_THROW(load_peft_adapter(run / "adapter"));
}

}  // namespace
}  // namespace loft
