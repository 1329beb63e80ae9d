// Ctrl-C/SIGTERM during `loft finetune` (app/interrupt.h): the run checkpoints the step it just
// took, writes the adapter so far, says "stopped at step N; continue with --resume" and exits
// 128 + the signal; --resume then reproduces the uninterrupted run's metrics. A second signal
// exits at once.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>

#include "studio/child_process.h"
#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> finetune_args(const fs::path& out, int steps) {
  const fs::path ex = test::source_dir() / "examples";
  return {"finetune", "--model", (ex / "stories260K").string(), "--data", (ex / "demo.jsonl").string(),
          "--out", out.string(), "--steps", std::to_string(steps), "--batch", "4", "--seq", "128",
          "--lr", "5e-3", "--device", "cpu", "--seed", "3", "--schedule", "cosine", "--warmup", "2"};
}

size_t lines_of(const fs::path& file) { return test::read_jsonl(file).size(); }

struct Stopped {
  int status = 0;
  std::string err;
};

// Runs the real binary until metrics.jsonl has `after` lines, sends `signals` signals `sig`, waits.
Stopped run_and_signal(const std::vector<std::string>& args, const fs::path& run, size_t after, int signals,
                       int sig = SIGTERM) {
  std::vector<std::string> argv{test::loft_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  const studio::ChildProcess c = studio::spawn_child(argv);
  close(c.out_fd);
  fcntl(c.err_fd, F_SETFL, O_NONBLOCK);
  Stopped s;
  char buf[4096];
  auto drain = [&] {
    for (ssize_t n; (n = read(c.err_fd, buf, sizeof buf)) > 0;) s.err.append(buf, size_t(n));
  };
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (lines_of(run / "metrics.jsonl") < after && std::chrono::steady_clock::now() < end) {
    drain();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int i = 0; i < signals; ++i) {
    kill(c.pid, sig);
    // The kernel merges a signal into one still pending: send the next once this one was handled.
    while (i + 1 < signals && s.err.find("loft: stopping") == std::string::npos && std::chrono::steady_clock::now() < end) {
      drain();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  fcntl(c.err_fd, F_SETFL, 0);
  for (ssize_t n; (n = read(c.err_fd, buf, sizeof buf)) > 0;) s.err.append(buf, size_t(n));
  close(c.err_fd);
  waitpid(c.pid, &s.status, 0);
  return s;
}

TEST(FinetuneStop, SigtermCheckpointsAndResumeMatchesAnUninterruptedRun) {
  test::TempDir dir;
  constexpr int kSteps = 14;
  const auto full = test::run_cli_captured(finetune_args(dir / "full", kSteps));
  ASSERT_EQ(full.code, 0) << full.err;
  const auto want = test::read_jsonl(dir / "full" / "metrics.jsonl");

  const Stopped s = run_and_signal(finetune_args(dir / "run", kSteps), dir / "run", 3, 1);
  ASSERT_TRUE(WIFEXITED(s.status)) << studio::describe_exit(s.status);
  EXPECT_EQ(WEXITSTATUS(s.status), 128 + SIGTERM) << s.err;
  const auto done = test::read_jsonl(dir / "run" / "metrics.jsonl");
  ASSERT_GE(done.size(), 3u);
  ASSERT_LT(done.size(), size_t(kSteps)) << "the run finished before the signal";
  const int64_t step = done.back()["step"];
  EXPECT_TRUE(test::contains(s.err, "loft: stopped at step " + std::to_string(step) + "; continue with --resume")) << s.err;
  EXPECT_TRUE(fs::exists(dir / "run" / "checkpoints" / ("step-" + std::to_string(step)) / "trainer_state.json"));
  EXPECT_TRUE(fs::exists(dir / "run" / "adapter" / "adapter_config.json"));  // the adapter so far

  auto resume = finetune_args(dir / "run", kSteps);
  resume.push_back("--resume");
  const auto r = test::run_cli_captured(resume);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto got = test::read_jsonl(dir / "run" / "metrics.jsonl");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    for (const char* key : {"step", "loss", "lr", "grad_norm"}) EXPECT_EQ(got[i][key], want[i][key]) << i << " " << key;
}

TEST(FinetuneStop, SecondSignalExitsAtOnce) {
  test::TempDir dir;
  const Stopped s = run_and_signal(finetune_args(dir / "run", 200), dir / "run", 2, 2);
  ASSERT_TRUE(WIFEXITED(s.status)) << studio::describe_exit(s.status);
  EXPECT_EQ(WEXITSTATUS(s.status), 128 + SIGTERM);
  EXPECT_FALSE(test::contains(s.err, "stopped at step")) << s.err;
  EXPECT_FALSE(fs::exists(dir / "run" / "adapter"));
}

// SIGHUP (a closed terminal; a studio that died sends it to its jobs, once per exiting thread)
// stops the run with its checkpoint however often it comes.
TEST(FinetuneStop, RepeatedSighupStillCheckpoints) {
  test::TempDir dir;
  const Stopped s = run_and_signal(finetune_args(dir / "run", 200), dir / "run", 2, 3, SIGHUP);
  ASSERT_TRUE(WIFEXITED(s.status)) << studio::describe_exit(s.status);
  EXPECT_EQ(WEXITSTATUS(s.status), 128 + SIGHUP) << s.err;
  EXPECT_TRUE(test::contains(s.err, "; continue with --resume")) << s.err;
  EXPECT_TRUE(fs::exists(dir / "run" / "adapter" / "adapter_config.json"));
  EXPECT_TRUE(fs::exists(dir / "run" / "checkpoints"));
}

}  // namespace
}  // namespace loft
