// Two finetune processes (the real binary) into one --out: exactly one runs, the other is refused
// naming the holder's pid and start time, and the folder ends as one whole run (every step once
// in metrics.jsonl, every checkpoint complete) — also when the second asks for --overwrite or
// --resume. A run killed with SIGKILL leaves its lock file, which the next run takes over.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "engine/io/folder_lock.h"
#include "engine/peft/peft_adapter.h"
#include "tests/common/cli_expect.h"
#include "tests/common/loft_process.h"
#include "tests/common/test_util.h"
#include "tests/robustness/bystanders.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

constexpr int kSteps = 24;

std::vector<std::string> run_args(const fs::path& run, std::vector<std::string> extra = {}) {
  std::vector<std::string> base{"--steps", std::to_string(kSteps), "--batch", "4", "--save-every", "4"};
  base.insert(base.end(), extra.begin(), extra.end());
  return test::finetune(run, base);
}

// The run folder holds one whole run of `steps` steps: each step's metrics line once, in order;
// each checkpoint with all its files and its own step; the adapter loadable; no lock left.
void expect_one_whole_run(const fs::path& run, int steps) {
  const auto m = test::read_jsonl(run / "metrics.jsonl");
  ASSERT_EQ(m.size(), size_t(steps));
  for (int i = 0; i < steps; ++i) EXPECT_EQ(m[size_t(i)]["step"], i + 1);
  for (int s = 4; s < steps; s += 4) {  // the last step saves the adapter, not a checkpoint
    const fs::path c = run / "checkpoints" / ("step-" + std::to_string(s));
    for (const char* f : {"adapter.safetensors", "optimizer.safetensors", "trainer_state.json"})
      EXPECT_TRUE(fs::exists(c / f)) << c / f;
    EXPECT_EQ(nlohmann::json::parse(test::read_text(c / "trainer_state.json"))["step"], s);
  }
  EXPECT_NO_THROW(load_peft_adapter(run / "adapter"));
  EXPECT_FALSE(fs::exists(run / ".loft.lock"));
  for (const auto& e : fs::directory_iterator(run / "checkpoints"))
    EXPECT_TRUE(e.path().filename().string().starts_with("step-")) << e.path();
}

void expect_refused_by(const test::LoftProcess& p, int code, const LockHolder& holder) {
  const std::string err = p.err();
  EXPECT_EQ(code, 1) << err;
  EXPECT_TRUE(test::contains(err, "is in use by " + holder.describe())) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(ConcurrentRuns, ASecondRunIntoARunningFolderIsRefusedWhateverItAsks) {
  test::TempDir dir;
  const fs::path run = dir / "run";
  test::Bystanders around;
  around.plant(dir.path());
  test::LoftProcess first(run_args(run), dir / "first");
  ASSERT_TRUE(test::wait_for(first, [&] { return fs::exists(run / "metrics.jsonl"); })) << first.err();
  const std::optional<LockHolder> holder = folder_lock_holder(run);
  ASSERT_TRUE(holder);
  EXPECT_EQ(holder->pid, first.pid());
  EXPECT_EQ(holder->command, "finetune");
  around.plant(run);  // a person's files inside the running folder
  int n = 0;
  for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{{}, {"--overwrite"}, {"--resume"}}) {
    test::LoftProcess second(run_args(run, extra), dir / ("second" + std::to_string(n++)));
    const int code = second.wait();
    ASSERT_TRUE(first.running()) << "the first run ended before the second was refused: make it longer";
    expect_refused_by(second, code, *holder);
  }
  EXPECT_EQ(first.wait(), 0) << first.err();
  expect_one_whole_run(run, kSteps);
  EXPECT_TRUE(around.intact());
}

// Three runs with `extra` started together into `run`, nobody waiting for anybody: exactly one
// runs; each other one is refused with one line, by the lock (or, for a fresh run that came after
// the winner ended, by the run it left), and the folder ends as one whole run.
void race(const fs::path& dir, const fs::path& run, const std::vector<std::string>& extra) {
  std::vector<std::unique_ptr<test::LoftProcess>> ps;
  for (int i = 0; i < 3; ++i)
    ps.push_back(std::make_unique<test::LoftProcess>(run_args(run, extra), dir / cat("p", ps.size())));
  int ran = 0;
  for (auto& p : ps) {
    const int code = p->wait();
    ran += code == 0;
    if (code == 0) continue;
    const std::string err = p->err();
    EXPECT_TRUE(test::contains(err, "is in use by pid ") || test::contains(err, "already holds a run")) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
  EXPECT_EQ(ran, 1);
  expect_one_whole_run(run, kSteps);
}

TEST(ConcurrentRuns, RunsStartedTogetherEndAsOneWholeRun) {
  test::TempDir dir;
  race(dir.path(), dir / "run", {});
  race(dir.path(), dir / "run", {"--overwrite"});
}

TEST(ConcurrentRuns, ResumesStartedTogetherLeaveEveryCheckpointWhole) {
  test::TempDir dir;
  const fs::path run = dir / "run";
  test::LoftProcess killed(run_args(run), dir / "killed");
  ASSERT_TRUE(test::wait_for(killed, [&] { return fs::exists(run / "checkpoints" / "step-8"); }));
  killed.kill();
  race(dir.path(), run, {"--resume"});
}

// SIGKILL leaves .loft.lock naming the dead run; nobody holds it, and --resume takes it over.
TEST(ConcurrentRuns, TheLockOfAKilledRunIsTakenOver) {
  test::TempDir dir;
  const fs::path run = dir / "run";
  test::LoftProcess killed(run_args(run), dir / "killed");
  ASSERT_TRUE(test::wait_for(killed, [&] { return fs::exists(run / "checkpoints" / "step-4"); }));
  const pid_t pid = killed.pid();
  killed.kill();
  ASSERT_TRUE(fs::exists(run / ".loft.lock"));
  EXPECT_TRUE(test::contains(test::read_text(run / ".loft.lock"), cat("\"pid\":", pid)));
  EXPECT_FALSE(folder_lock_holder(run));
  test::LoftProcess resumed(run_args(run, {"--resume"}), dir / "resumed");
  EXPECT_EQ(resumed.wait(), 0) << resumed.err();
  expect_one_whole_run(run, kSteps);
}

}  // namespace
}  // namespace loft
