// loft finetune end to end on the CPU backend with stories260K-hf: the loss falls, metrics.jsonl
// and the PEFT adapter are written, a run killed mid-way resumes to exactly the metrics of an
// uninterrupted run, and a non-finite loss stops the run without writing anything.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/io/safetensors_writer.h"
#include "engine/peft/peft_adapter.h"
#include "tests/common/binary_run.h"
#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

std::string model_dir() { return test::data_path("models/stories260K-hf").string(); }
// The demo set ships with the project (examples/), found from the test binary's source tree.
std::string demo() {
  const fs::path here = test::source_dir();
  return (here / "examples" / "demo.jsonl").string();
}

std::vector<std::string> base_args(const fs::path& out, int steps) {
  return {"finetune", "--model", model_dir(), "--data", demo(), "--out", out.string(),
          "--steps", std::to_string(steps), "--batch", "4", "--seq", "256", "--lr", "3e-3",
          "--lora-rank", "8", "--device", "cpu", "--seed", "7"};
}

std::vector<nlohmann::json> read_metrics(const fs::path& run) { return test::read_jsonl(run / "metrics.jsonl"); }

TEST(Finetune, LossFallsAndWritesMetricsAndPeftAdapter) {
  test::TempDir dir;
  const auto r = test::run_cli_captured(base_args(dir / "run", 25));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("loft finetune plan"), std::string::npos);
  const auto m = read_metrics(dir / "run");
  ASSERT_EQ(m.size(), 25u);
  for (const char* k : {"step", "loss", "lr", "grad_norm", "tokens", "tokens_per_s"})
    EXPECT_TRUE(m.front().contains(k)) << k;
  const double first = m.front()["loss"], last = m.back()["loss"];
  EXPECT_LT(last, 0.7 * first) << "loss did not fall: " << first << " -> " << last;
  const PeftAdapter a = load_peft_adapter(dir / "run" / "adapter");
  EXPECT_EQ(a.rank, 8);
  EXPECT_EQ(a.modules.size(), 5u * 7u);
  // The stop ids travel with the adapter (every source says EOS 2 here) and into run_config.json.
  EXPECT_TRUE(test::contains(r.out, "  stop ids   2\n"));
  std::ifstream gen(dir / "run" / "adapter" / "generation_config.json");
  EXPECT_EQ(nlohmann::json::parse(gen), nlohmann::json::parse(R"({"bos_token_id": 1, "eos_token_id": 2})"));
  std::ifstream run_config(dir / "run" / "run_config.json");
  EXPECT_EQ(nlohmann::json::parse(run_config)["stop_ids"], nlohmann::json::array({2}));
}

// Starts the real binary, waits for `marker` to exist, then kills it with SIGKILL.
void run_and_kill_after(const std::vector<std::string>& args, const fs::path& marker,
                        int delay_ms = 0) {
  const pid_t pid = test::spawn_loft(args, "/dev/null", "/dev/null");
  ASSERT_GT(pid, 0);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(marker) && std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return;  // finished before the kill: still valid
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
}

// kill -9 at several moments (right after a checkpoint appears, and a few milliseconds later,
// which lands inside a step, a metrics append or the next checkpoint's write) loses at most the
// steps since the last checkpoint: --resume reproduces the uninterrupted metrics exactly.
TEST(Finetune, KilledRunResumesToTheSameMetrics) {
  test::TempDir dir;
  constexpr int kSteps = 30;
  const std::vector<std::string> extra{"--save-every", "5", "--schedule", "cosine", "--warmup", "3"};
  auto full_args = base_args(dir / "full", kSteps);
  full_args.insert(full_args.end(), extra.begin(), extra.end());
  ASSERT_EQ(test::run_cli_captured(full_args).code, 0);
  const auto a = read_metrics(dir / "full");
  ASSERT_EQ(a.size(), size_t(kSteps));

  struct KillPoint {
    const char* marker;
    int delay_ms;
  };
  for (const KillPoint k : {KillPoint{"step-5", 0}, KillPoint{"step-10", 7}, KillPoint{"step-20", 23}}) {
    const fs::path run = dir / (std::string("resumed-") + k.marker);
    auto args = base_args(run, kSteps);
    args.insert(args.end(), extra.begin(), extra.end());
    run_and_kill_after(args, run / "checkpoints" / k.marker, k.delay_ms);
    ASSERT_TRUE(fs::exists(run / "checkpoints" / k.marker)) << k.marker;
    auto resume = args;
    resume.push_back("--resume");
    const auto r = test::run_cli_captured(resume);
    ASSERT_EQ(r.code, 0) << k.marker << ": " << r.err;
    EXPECT_NE(r.out.find("resumed at step"), std::string::npos);
    const auto b = read_metrics(run);
    ASSERT_EQ(b.size(), size_t(kSteps)) << k.marker;
    for (size_t i = 0; i < a.size(); ++i)
      for (const char* key : {"step", "loss", "lr", "grad_norm", "tokens"})
        EXPECT_EQ(a[i][key], b[i][key]) << k.marker << ": step " << i + 1 << " field " << key;
    // No temporaries of the interrupted writes are left once the folder was claimed again.
    for (const auto& e : fs::recursive_directory_iterator(run)) {
      const std::string name = e.path().filename().string();
      EXPECT_FALSE(name.starts_with(".tmp-step-") || name.find(".loft-tmp.") != std::string::npos) << e.path();
    }
  }
}

// A loss that turns non-finite mid-run (a learning rate of 1e30 blows the adapter up after step
// 1) stops the run at that step: step 1's checkpoint stays, nothing of step 2 is applied or saved.
TEST(Finetune, NonFiniteLossStopsWithoutWriting) {
  test::TempDir dir;
  auto args = base_args(dir / "run", 5);
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--lr") args[i + 1] = "1e30";
  args.insert(args.end(), {"--save-every", "1"});
  const auto r = test::run_cli_captured(args);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "step 2: ")) << r.err;
  EXPECT_TRUE(test::contains(r.err, "nothing from this step was applied or saved")) << r.err;
  EXPECT_TRUE(fs::exists(dir / "run" / "checkpoints" / "step-1"));
  EXPECT_FALSE(fs::exists(dir / "run" / "checkpoints" / "step-2"));
  EXPECT_FALSE(fs::exists(dir / "run" / "adapter"));
}

// An initial adapter holding a NaN is refused when it is loaded, naming the tensor; nothing is
// written.
TEST(Finetune, NonFiniteInitAdapterIsRefusedAtLoad) {
  test::TempDir dir;
  PeftAdapter bad;
  bad.rank = 8;
  bad.alpha = 16;
  bad.target_modules = {"q_proj"};
  std::vector<float> a(8 * 64, 0.01f), b(64 * 8, 0.0f);
  b[3] = NAN;
  for (int l = 0; l < 5; ++l)
    bad.modules["model.layers." + std::to_string(l) + ".self_attn.q_proj"] = {
        Tensor::from_vector(a, {8, 64}), Tensor::from_vector(b, {64, 8})};
  save_peft_adapter(dir / "bad", bad);
  auto args = base_args(dir / "run", 5);
  args.insert(args.end(), {"--init-adapter", (dir / "bad").string(), "--save-every", "1"});
  const auto r = test::run_cli_captured(args);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "self_attn.q_proj.lora_B holds NaN or Inf")) << r.err;
  EXPECT_FALSE(fs::exists(dir / "run" / "checkpoints"));
  EXPECT_FALSE(fs::exists(dir / "run" / "adapter"));
}

TEST(Finetune, SeqTooShortForAnyResponseIsAnErrorNotAHang) {
  test::TempDir dir;
  auto args = base_args(dir / "run", 5);
  args[12] = "16";  // --seq 16: the Alpaca prompt alone is longer
  ASSERT_EQ(args[11], "--seq");
  const auto r = test::run_cli_captured(args);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(test::contains(r.err, "raise --seq")) << r.err;
}

TEST(Finetune, HaloNf4BackboneTrainsAndBackboneIsRefusedElsewhere) {
  test::TempDir dir;
  auto args = base_args(dir / "run", 10);
  for (const char* a : {"--method", "halo", "--backbone", "nf4", "--warmup", "0"}) args.push_back(a);
  const auto r = test::run_cli_captured(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "halo (level 2, fp8, backbone nf4)")) << r.out;
  const auto m = read_metrics(dir / "run");
  ASSERT_GE(m.size(), 2u);
  EXPECT_LT(m.back()["loss"].get<double>(), m.front()["loss"].get<double>());
  auto lora = base_args(dir / "lora", 1);
  for (const char* a : {"--method", "lora", "--backbone", "nf4"}) lora.push_back(a);
  const auto bad = test::run_cli_captured(lora);
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(test::contains(bad.err, "--backbone")) << bad.err;
}

}  // namespace
}  // namespace loft
