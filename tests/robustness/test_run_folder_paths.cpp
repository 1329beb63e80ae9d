// finetune's --out (and a recipe's output_dir) is loft's alone: never the root or home folder or a
// folder of someone else's files; --resume and --overwrite remove only the run's own entries and
// the temporaries its writers make; every planted file in, beside and above the folder survives
// byte for byte (docs/reliability.md, "Paths and locks").
#include <cstdlib>
#include <fstream>

#include "engine/train/run_folder.h"
#include "tests/common/cli_expect.h"
#include "tests/common/test_util.h"
#include "tests/robustness/bystanders.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// $HOME set to `home` while it lives.
class HomeAt {
 public:
  explicit HomeAt(const fs::path& home) {
    if (const char* h = std::getenv("HOME")) old_ = h;
    ::setenv("HOME", home.c_str(), 1);
  }
  ~HomeAt() {
    if (old_) ::setenv("HOME", old_->c_str(), 1);
    else ::unsetenv("HOME");
  }

 private:
  std::optional<std::string> old_;
};

TEST(RunFolderPaths, RootAndHomeAreNeverRunFolders) {
  test::TempDir dir;
  test::Bystanders home;
  home.plant(dir / "home");
  const HomeAt at(dir / "home");
  for (const std::string& out : std::vector<std::string>{"/", "//", "/tmp/..", (dir / "home").string(), (dir / "home/").string()}) {
    const auto r = test::run_cli_captured(test::finetune(out));
    test::expect_one_line(r, 2, out.starts_with(dir.path().string()) ? "the home folder" : "the root folder");
    const auto o = test::run_cli_captured(test::finetune(out, {"--overwrite"}));
    EXPECT_EQ(o.code, 2) << out;
  }
  EXPECT_FALSE(fs::exists(dir / "home" / ".loft-run"));
  EXPECT_TRUE(home.intact());
  // A recipe's output_dir is --out.
  write(dir / "r.yaml", "output_dir: /\n");
  auto args = test::finetune(dir / "unused");
  args.erase(args.begin() + 5, args.begin() + 7);  // "--out", DIR
  args.insert(args.begin() + 1, {"--config", (dir / "r.yaml").string()});
  test::expect_one_line(test::run_cli_captured(args), 2, "the root folder");
}

TEST(RunFolderPaths, AFolderOfOtherFilesIsRefusedWhateverTheFlags) {
  test::TempDir dir;
  test::Bystanders files;
  files.plant(dir / "project");
  files.plant(dir.path());
  for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{{}, {"--overwrite"}, {"--resume"}}) {
    const auto r = test::run_cli_captured(test::finetune(dir / "project", extra));
    test::expect_one_line(r, 2, "is not a loft run folder and not empty");
  }
  EXPECT_FALSE(fs::exists(dir / "project" / ".loft-run"));
  EXPECT_FALSE(fs::exists(dir / "project" / ".loft.lock"));
  EXPECT_TRUE(files.intact());
  // An empty folder is claimed, and so is one a failed run left (its marker only).
  fs::create_directory(dir / "empty");
  ASSERT_EQ(test::run_cli_captured(test::finetune(dir / "empty")).code, 0);
  fs::create_directory(dir / "failed");
  write(dir / "failed" / ".loft-run", "{}\n");
  ASSERT_EQ(test::run_cli_captured(test::finetune(dir / "failed")).code, 0);
  EXPECT_TRUE(fs::exists(dir / "failed" / "adapter"));
  EXPECT_FALSE(fs::exists(dir / "failed" / ".loft.lock")) << "the lock goes with the run";
  EXPECT_TRUE(files.intact());
}

// --resume and --overwrite remove the temporaries loft's writers make where they make them, and
// nothing else: a person's files in the run folder, beside it and above it stay.
TEST(RunFolderPaths, ReuseRemovesOnlyTheRunsOwnTemporaries) {
  test::TempDir dir;
  const fs::path run = dir / "runs" / "a";
  ASSERT_EQ(test::run_cli_captured(test::finetune(run, {"--save-every", "1"})).code, 0);
  EXPECT_TRUE(fs::exists(run / ".loft-run"));
  test::Bystanders around, in_run_folders;
  around.plant(dir.path());
  around.plant(dir / "runs");
  around.plant(dir / "runs" / "b");
  around.plant(run);
  around.plant_file(run / "metrics.jsonl.tmp.x9", "not a pid");
  around.plant_file(run / "mine.json.loft-tmp.12", "not a file the run writes");
  in_run_folders.plant(run / "checkpoints");
  in_run_folders.plant(run / "adapter");
  in_run_folders.plant_file(run / "checkpoints" / ".tmp-step-3" / "z", "no pid");
  const std::vector<fs::path> ours = {run / "metrics.jsonl.loft-tmp.4242",  run / "config.yaml.tmp.17",
                                      run / ".loft-run.loft-tmp.3",         run / "checkpoints" / ".tmp-step-9-123",
                                      run / "adapter" / "adapter_config.json.loft-tmp.5",
                                      run / "eval" / "mmlu.json.loft-tmp.6"};
  for (const fs::path& p : ours) write(p.filename().string().starts_with(".tmp-step") ? p / "x" : p, "partial");
  const auto r = test::run_cli_captured(test::finetune(run, {"--steps", "3", "--save-every", "1", "--resume"}));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const fs::path& p : ours) EXPECT_FALSE(fs::exists(p)) << p;
  EXPECT_TRUE(around.intact());
  EXPECT_TRUE(in_run_folders.intact());
  EXPECT_EQ(test::read_jsonl(run / "metrics.jsonl").size(), 3u);
  // --overwrite replaces the run's entries (checkpoints/ and adapter/ whole) and nothing else.
  ASSERT_EQ(test::run_cli_captured(test::finetune(run, {"--overwrite"})).code, 0);
  EXPECT_TRUE(around.intact());
  EXPECT_FALSE(fs::exists(run / "checkpoints"));
  EXPECT_EQ(test::read_jsonl(run / "metrics.jsonl").size(), 2u);
}

// Run folders written before the marker existed are still loft's: metrics.jsonl or
// run_config.json says so.
TEST(RunFolderPaths, RunFoldersWithoutTheMarkerAreRecognised) {
  test::TempDir dir;
  ASSERT_EQ(test::run_cli_captured(test::finetune(dir / "run", {"--save-every", "1"})).code, 0);
  fs::remove(dir / "run" / ".loft-run");
  EXPECT_TRUE(is_run_folder(dir / "run"));
  test::expect_one_line(test::run_cli_captured(test::finetune(dir / "run")), 2, "already holds a run");
  ASSERT_EQ(test::run_cli_captured(test::finetune(dir / "run", {"--steps", "3", "--resume"})).code, 0);
  EXPECT_TRUE(fs::exists(dir / "run" / ".loft-run"));
  EXPECT_FALSE(is_run_folder(dir.path()));
}

// evaluate --adapter RUN/adapter saves its report in RUN/eval/ only while no other process holds
// the run folder (a finetune resuming or overwriting it); otherwise it warns and saves nothing
// there, and the evaluation itself still succeeds.
TEST(RunFolderPaths, EvaluateSavesIntoARunOnlyWhenNobodyHoldsIt) {
  test::TempDir dir;
  const fs::path run = dir / "run";
  ASSERT_EQ(test::run_cli_captured(test::finetune(run)).code, 0);
  const std::vector<std::string> evaluate{
      "evaluate", "--model", test::data_path("models/stories260K-hf").string(), "--adapter",
      (run / "adapter").string(), "--task", "mmlu", "--data", test::data_path("mmlu").string(),
      "--subjects", "abstract_algebra", "--limit", "1", "--shots", "0", "--device", "cpu"};
  {
    FolderLock held(run, "finetune", "--out " + run.string());
    const test::CliResult r = test::run_cli_captured(evaluate);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(test::contains(r.err, "warning: the mmlu report is not saved in " + (run / "eval").string()));
    EXPECT_TRUE(test::contains(r.err, "finetune")) << r.err;
    EXPECT_FALSE(fs::exists(run / "eval" / "mmlu.json"));
  }
  const test::CliResult r = test::run_cli_captured(evaluate);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(run / "eval" / "mmlu.json"));
  EXPECT_FALSE(fs::exists(run / kFolderLockFile)) << "evaluate lets the folder go";
}

}  // namespace
}  // namespace loft
