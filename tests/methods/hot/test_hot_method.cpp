// --method hot end to end on the CPU backend with stories260K-hf: every option trains, LQS's
// calibration runs before step 0, a resumed run reproduces the uninterrupted metrics exactly (the
// SR counter and LQS's choices travel in loft_state.safetensors), the adapter loads in evaluate
// and generate, and loft info estimates hot's memory.
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/peft/peft_adapter.h"
#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

std::string model_dir() { return test::data_path("models/stories260K-hf").string(); }
std::string demo() { return (test::source_dir() / "examples" / "demo.jsonl").string(); }

std::vector<std::string> hot_args(const fs::path& out, int steps, std::vector<std::string> extra) {
  std::vector<std::string> a{"finetune", "--model", model_dir(), "--data", demo(), "--out", out.string(),
                             "--steps", std::to_string(steps), "--batch", "4", "--seq", "128", "--lr", "3e-3",
                             "--lora-rank", "8", "--device", "cpu", "--seed", "7", "--method", "hot",
                             "--no-report"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(HotMethod, EveryOptionTrains) {
  test::TempDir dir;
  int n = 0;
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, {"--hot-lqs"}, {"--hot-lqs", "--hot-lqs-batches", "2"},
        {"--hot-gx-bits", "8"}, {"--hot-round", "rne"}, {"--backbone", "nf4"}, {"--backbone", "fp8"}}) {
    const fs::path run = dir / ("run" + std::to_string(n++));
    const auto r = test::run_cli_captured(hot_args(run, 12, extra));
    ASSERT_EQ(r.code, 0) << r.err;
    const auto m = test::read_jsonl(run / "metrics.jsonl");
    ASSERT_EQ(m.size(), 12u);
    const double first = m.front()["loss"], last = m.back()["loss"];
    EXPECT_LT(last, first) << r.out;
    const bool lqs = !extra.empty() && extra[0] == "--hot-lqs";
    EXPECT_EQ(bool(test::contains(r.out, "calibrated on ")), lqs) << r.out;
    EXPECT_EQ(bool(test::contains(r.out, "LQS off")), !lqs) << r.out;
    EXPECT_TRUE(fs::exists(run / "adapter" / "loft_state.safetensors"));
  }
  EXPECT_TRUE(test::contains(test::run_cli_captured(hot_args(dir / "bad", 2, {"--hot-gx-bits", "6"})).err,
                             "--hot-gx-bits"));
  const auto bad = test::run_cli_captured(hot_args(dir / "bad2", 2, {"--hot-round", "up"}));
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(test::contains(bad.err, "--hot-round")) << bad.err;
  for (const char* n : {"0", "-3", "2000", "x", "nan"}) {
    const auto r = test::run_cli_captured(
        hot_args(dir / cat("bad-batches-", n), 2, {"--hot-lqs", "--hot-lqs-batches", n}));
    EXPECT_EQ(r.code, 2) << n;
    EXPECT_TRUE(test::contains(r.err, "--hot-lqs-batches")) << r.err;
  }
  // --backbone fp8 is hot's, not halo's: refused there with HALO's own message.
  auto halo = hot_args(dir / "bad3", 2, {"--backbone", "fp8"});
  for (auto& a : halo)
    if (a == "hot") a = "halo";
  EXPECT_EQ(test::run_cli_captured(halo).code, 2);
}

// A run interrupted after its step-4 checkpoint (the later checkpoint removed) and resumed gives
// the uninterrupted run's metrics exactly, with SR and LQS.
TEST(HotMethod, ResumeReproducesTheUninterruptedMetrics) {
  test::TempDir dir;
  const std::vector<std::string> extra{"--hot-lqs", "--save-every", "4", "--schedule", "cosine", "--warmup", "2"};
  ASSERT_EQ(test::run_cli_captured(hot_args(dir / "full", 12, extra)).code, 0);
  const auto a = test::read_jsonl(dir / "full" / "metrics.jsonl");
  ASSERT_EQ(a.size(), 12u);
  ASSERT_EQ(test::run_cli_captured(hot_args(dir / "cut", 12, extra)).code, 0);
  fs::remove_all(dir / "cut" / "checkpoints" / "step-8");
  ASSERT_TRUE(fs::exists(dir / "cut" / "checkpoints" / "step-4" / "loft_state.safetensors"));
  auto resume = hot_args(dir / "cut", 12, extra);
  resume.push_back("--resume");
  const auto r = test::run_cli_captured(resume);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "resumed at step 4")) << r.out;
  EXPECT_FALSE(test::contains(r.out, "calibrated on")) << "a resume restores LQS's choices";
  const auto b = test::read_jsonl(dir / "cut" / "metrics.jsonl");
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i)
    for (const char* key : {"step", "loss", "lr", "grad_norm", "tokens"})
      EXPECT_EQ(a[i][key], b[i][key]) << "step " << i + 1 << " field " << key;
  // Without the SR counter's state the resumed steps would draw other codes.
  fs::remove(dir / "cut" / "checkpoints" / "step-4" / "loft_state.safetensors");
  fs::remove_all(dir / "cut" / "checkpoints" / "step-8");
  const auto missing = test::run_cli_captured(resume);
  EXPECT_NE(missing.code, 0);
  EXPECT_TRUE(test::contains(missing.err, "hot_micro_step")) << missing.err;
}

TEST(HotMethod, AdapterLoadsInEvaluateAndGenerateAndInfoEstimatesIt) {
  test::TempDir dir;
  ASSERT_EQ(test::run_cli_captured(hot_args(dir / "run", 4, {"--backbone", "nf4", "--hot-gx-bits", "8"})).code, 0);
  const fs::path adapter = dir / "run" / "adapter";
  const PeftAdapter a = load_peft_adapter(adapter);
  ASSERT_TRUE(a.method);
  EXPECT_EQ(a.method->method, "hot");
  // Projections (adapted or not) carry the SR counter and the scale choice.
  EXPECT_EQ(a.method_state.size(), 5u * 7u * 2u);
  std::ofstream(dir / "text.txt") << "Once upon a time there was a cat.\nThe dog ran home.\n";
  const auto ev = test::run_cli_captured({"evaluate", "--model", model_dir(), "--adapter", adapter.string(),
                                          "--task", "ppl", "--data", (dir / "text.txt").string(),
                                          "--device", "cpu"});
  ASSERT_EQ(ev.code, 0) << ev.err;
  EXPECT_TRUE(test::contains(ev.out, "perplexity")) << ev.out;
  const auto gen = test::run_cli_captured({"generate", "--model", model_dir(), "--adapter", adapter.string(),
                                           "--prompt", "Once upon", "--max-new-tokens", "4", "--device", "cpu"});
  ASSERT_EQ(gen.code, 0) << gen.err;
  const auto info = test::run_cli_captured({"info", "--model", model_dir()});
  ASSERT_EQ(info.code, 0) << info.err;
  for (const char* row : {"hot-dense", "hot-fp8", "hot-nf4"}) EXPECT_TRUE(test::contains(info.out, row)) << row;
}

}  // namespace
}  // namespace loft
