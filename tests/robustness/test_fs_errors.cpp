// File-system failures are one-line messages naming the path and what failed, never the
// library's "filesystem error: ..." text: names over 255 bytes, /proc, a read-only file system,
// tb/ that is a file or a dangling link, a file where a folder must be, --config naming a folder.
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "tests/common/cli_expect.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> export_to(const fs::path& out) {
  return {"export", "--model", test::data_path("models/stories260K-hf").string(), "--format", "bf16",
          "--out", out.string()};
}

void expect_clear(const test::CliResult& r, int code, const std::string& needle) {
  test::expect_one_line(r, code, needle);
  EXPECT_FALSE(test::contains(r.err, "filesystem error")) << r.err;
}

TEST(FsErrors, NamesLongerThanAFileSystemTakes) {
  test::TempDir dir;
  const fs::path out = dir / std::string(300, 'a');
  expect_clear(test::run_cli_captured(test::finetune(out)), 2, "is 300 bytes; a file system takes at most 255");
  expect_clear(test::run_cli_captured(test::finetune(out / "run")), 2, "is 300 bytes");
  expect_clear(test::run_cli_captured(export_to(out)), 2, "is 300 bytes");
  ASSERT_EQ(test::run_cli_captured(test::finetune(dir / "run")).code, 0);
  expect_clear(test::run_cli_captured({"report", (dir / "run").string(), "--out", (out / "r.html").string()}), 2,
               "is 300 bytes");
}

TEST(FsErrors, ProcAndAFileWhereAFolderMustBe) {
  test::TempDir dir;
  expect_clear(test::run_cli_captured(test::finetune("/proc/loft-test/run")), 1,
               "--out /proc/loft-test/run: cannot create the folder (");
  expect_clear(test::run_cli_captured(test::finetune("/proc/self")), 2, "is not a loft run folder");
  expect_clear(test::run_cli_captured(export_to("/proc/loft-test")), 1, "--out /proc/loft-test: cannot create /proc/.loft-test.loft-tmp-");
  std::ofstream(dir / "file") << "x";
  expect_clear(test::run_cli_captured(test::finetune(dir / "file" / "run")), 1, "(Not a directory)");
  expect_clear(test::run_cli_captured(export_to(dir / "file" / "o")), 2, "its parent folder does not exist");
}

TEST(FsErrors, TensorboardFolderThatIsAFileOrADanglingLink) {
  test::TempDir dir;
  const fs::path run = dir / "run";
  ASSERT_EQ(test::run_cli_captured(test::finetune(run, {"--save-every", "1"})).code, 0);
  std::ofstream(run / "tb") << "not a folder";
  const auto resume = test::finetune(run, {"--steps", "3", "--save-every", "1", "--resume", "--tensorboard"});
  expect_clear(test::run_cli_captured(resume), 1, (run / "tb").string() + " is a file, not a folder");
  fs::remove(run / "tb");
  fs::create_symlink(dir / "gone", run / "tb");
  expect_clear(test::run_cli_captured(resume), 1, (run / "tb").string() + " is a link to nothing");
  fs::remove(run / "tb");
  EXPECT_EQ(test::run_cli_captured(resume).code, 0);
}

TEST(FsErrors, ConfigNamingAFolder) {
  test::TempDir dir;
  auto args = test::finetune(dir / "run");
  args.insert(args.begin() + 1, {"--config", dir.path().string()});
  expect_clear(test::run_cli_captured(args), 2, "is a folder; name a TOML/INI/YAML file");
  EXPECT_FALSE(fs::exists(dir / "run"));
}

// A read-only tmpfs, mounted in a mount namespace of the commands' own (unshare): skipped where
// the machine allows none.
TEST(FsErrors, AReadOnlyFileSystem) {
  test::TempDir dir;
  const fs::path ro = dir / "ro";
  fs::create_directory(ro);
  const std::string mount = "mount -t tmpfs -o ro tmpfs '" + ro.string() + "'";
  std::string unshare;
  for (const char* u : {"unshare -m", "unshare -rm"})
    if (std::system((std::string(u) + " sh -c \"" + mount + "\" >/dev/null 2>&1").c_str()) == 0) {
      unshare = u;
      break;
    }
  if (unshare.empty()) GTEST_SKIP() << "no mount namespace here (unshare)";
  ASSERT_EQ(test::run_cli_captured(test::finetune(dir / "run")).code, 0);  // for report
  const std::vector<std::pair<std::string, std::vector<std::string>>> commands = {
      {"finetune", test::finetune(ro / "run")},
      {"export", export_to(ro / "o")},
      {"report", {"report", (dir / "run").string(), "--out", (ro / "r.html").string()}}};
  std::string script = mount;
  for (const auto& [name, args] : commands) {
    script += "; '" + std::string(test::loft_binary()) + "'";
    for (const std::string& a : args) script += " '" + a + "'";
    script += " 2>'" + (dir / name).string() + ".err'; echo $? >'" + (dir / name).string() + ".code'";
  }
  std::ofstream(dir / "script.sh") << script << "\n";
  ASSERT_EQ(std::system((unshare + " sh '" + (dir / "script.sh").string() + "'").c_str()), 0);
  const auto check = [&](const std::string& name, int code, const std::string& needle) {
    const test::CliResult r{std::stoi(test::read_text(dir / (name + ".code"))), "",
                            test::read_text(dir / (name + ".err"))};
    expect_clear(r, code, needle);
    EXPECT_TRUE(test::contains(r.err, "Read-only file system")) << r.err;
  };
  check("finetune", 1, "--out " + (ro / "run").string() + ": cannot create the folder");
  check("export", 1, "--out " + (ro / "o").string() + ": cannot create");
  check("report", 1, (ro / "r.html").string());
}

}  // namespace
}  // namespace loft
