// A real run's report: stories260K trained 200 steps on the CPU with validation, then MMLU and
// GSM8K evaluated on its adapter (saved into the run folder), then `loft report`: the page is
// checked for its text and rendered by headless Chromium (screenshot and DOM text; that part
// skips where none is installed). A shorter run's TensorBoard files are decoded step by step, and
// two runs share one page.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "tests/common/cli_capture.h"
#include "tests/common/event_decode.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

// stories260K on the demo data, validation on a tenth of it, on the CPU.
test::CliResult train(const fs::path& run, int steps, int eval_every) {
  const fs::path src = test::source_dir();
  return test::run_cli_captured({"finetune", "--model", (src / "examples" / "stories260K").string(), "--data",
                                 (src / "examples" / "demo.jsonl").string(), "--steps", std::to_string(steps), "--batch",
                                 "2", "--seq", "128", "--lr", "3e-3", "--lora-rank", "8", "--val-fraction", "0.1",
                                 "--eval-every", std::to_string(eval_every), "--tensorboard", "--device", "cpu", "--out",
                                 run.string()});
}

// MMLU (two subjects, two questions each) and GSM8K (one question) on the run's adapter.
void evaluate(const fs::path& run, std::vector<test::CliResult>& results) {
  const std::string mmlu = test::data_path("mmlu").string(), gsm8k = test::data_path("gsm8k").string();
  for (std::vector<std::string> task : {std::vector<std::string>{"--task", "mmlu", "--data", mmlu, "--subjects",
                                                                "abstract_algebra,sociology", "--limit", "2", "--shots", "1"},
                                        {"--task", "gsm8k", "--data", gsm8k, "--limit", "1", "--shots", "1",
                                         "--max-gen-toks", "8"}}) {
    std::vector<std::string> args = {"evaluate", "--model", (test::source_dir() / "examples" / "stories260K").string(),
                                     "--adapter", (run / "adapter").string(), "--device", "cpu"};
    args.insert(args.end(), task.begin(), task.end());
    results.push_back(test::run_cli_captured(args));
  }
}

// Headless Chromium: `chromium-headless-shell` (Debian's package CI installs) or `chromium --headless`.
std::string chromium() {
  for (const char* c : {"chromium-headless-shell", "chromium", "google-chrome"})
    if (std::system(("command -v " + std::string(c) + " >/dev/null 2>&1").c_str()) == 0)
      return std::string(c) + (std::string(c) == "chromium-headless-shell" ? "" : " --headless");
  return "";
}

// 200 steps (about 10 s on one core), then its evaluations, then `loft report` and Chromium.
TEST(RunReport, RealRunPageTextAndChromiumRendering) {
  test::TempDir dir;
  const fs::path run = dir / "stories-lora";
  const auto trained = train(run, 200, 50);
  ASSERT_EQ(trained.code, 0) << trained.err;
  std::vector<test::CliResult> evals;
  evaluate(run, evals);
  for (const auto& e : evals) ASSERT_EQ(e.code, 0) << e.err;
  const auto report = test::run_cli_captured({"report", run.string()});
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_TRUE(test::contains(trained.out, "report written to " + (run / "report.html").string()));
  EXPECT_TRUE(test::contains(evals[0].err, "report saved to " + (run / "eval" / "mmlu.json").string()));
  EXPECT_TRUE(fs::exists(run / "eval" / "gsm8k.json"));
  const std::string h = test::read_text(run / "report.html");
  for (const char* part :
       {"<title>loft report: stories-lora</title>", "<tr><th>steps</th><td>200</td></tr>",
        "<tr><th>batch × seq</th><td>2 × 128</td></tr>", "final validation loss", "(step 200)",
        "Loss: training (smoothed, raw faint) and validation (dashed)", "stories-lora validation step 150:",
        "Learning rate", "Gradient norm (before clipping)", "Tokens/s", "Peak memory (MiB)",
        "mmlu 1-shot, limit 2 · acc", "mmlu 1-shot, limit 2 · categories · stem",
        "mmlu 1-shot, limit 2 · categories · social_sciences", "gsm8k 1-shot, limit 1 · exact_match · strict-match",
        "<tr><th>rank r</th><td>8</td></tr>", "trained tokens (targets)", "masked tokens (prompts, context)",
        "examples truncated to seq", "config.yaml</summary>", "lora_rank: 8", "tensorboard: true"})
    EXPECT_TRUE(test::contains(h, part));
  EXPECT_FALSE(test::contains(h, "<script"));
  EXPECT_TRUE(test::contains(h, "stories-lora validation step 150:"));

  const std::string browser = chromium();
  if (browser.empty()) GTEST_SKIP() << "page text checked; not rendered: no headless Chromium (Debian: chromium-headless-shell)";
  const std::string flags = " --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,2200 ";
  const std::string url = "file://" + (run / "report.html").string();
  const fs::path png = dir / "report.png", dom = dir / "dom.html";
  ASSERT_EQ(std::system((browser + flags + "--screenshot=" + png.string() + " " + url + " >/dev/null 2>&1").c_str()), 0);
  const std::string image = test::read_text(png);
  ASSERT_GT(image.size(), 20000u) << "a screenshot of the charts and tables";
  EXPECT_EQ(image.substr(0, 8), "\x89PNG\r\n\x1a\n");
  auto be32 = [&](size_t at) {
    return uint32_t(uint8_t(image[at])) << 24 | uint32_t(uint8_t(image[at + 1])) << 16 |
           uint32_t(uint8_t(image[at + 2])) << 8 | uint32_t(uint8_t(image[at + 3]));
  };
  EXPECT_EQ(be32(16), 1280u);  // IHDR width and height
  EXPECT_EQ(be32(20), 2200u);
  ASSERT_EQ(std::system((browser + flags + "--dump-dom " + url + " > " + dom.string() + " 2>/dev/null").c_str()), 0);
  const std::string text = test::read_text(dom);
  for (const char* part : {"loft run report", "stories-lora", "Summary", "Evaluation", "Configuration",
                           "mmlu 1-shot, limit 2", "<svg class=\"chart\"", "<polyline"})
    EXPECT_TRUE(test::contains(text, part));
}

TEST(RunReport, TensorBoardEventsHoldEveryStepsScalars) {
  test::TempDir dir;
  const fs::path run = dir / "tb-run";
  const auto trained = train(run, 30, 10);
  ASSERT_EQ(trained.code, 0) << trained.err;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(run / "tb")) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(files[0].filename().string().starts_with("events.out.tfevents."));
  const auto d = test::decode_event_file(files[0]);  // CRCs checked
  if (!d) GTEST_SKIP() << "protoc is not installed (scripts/setup.sh installs protobuf-compiler)";
  EXPECT_EQ(d->file_version, "brain.Event:2");
  EXPECT_EQ(d->text.size(), 31u);
  const auto metrics = test::read_jsonl(run / "metrics.jsonl");
  ASSERT_EQ(metrics.size(), 30u);
  std::map<std::pair<int64_t, std::string>, double> got;
  for (const auto& [step, tag, value] : d->scalars) got[{step, tag}] = value;
  for (const auto& m : metrics) {
    const int64_t s = m["step"];
    for (const auto& [tag, key] : std::vector<std::pair<std::string, std::string>>{
             {"train/loss", "loss"}, {"train/lr", "lr"}, {"train/grad_norm", "grad_norm"},
             {"train/tokens_per_s", "tokens_per_s"}, {"train/step_seconds", "step_seconds"}, {"val/loss", "val_loss"}}) {
      if (!m.contains(key)) {
        EXPECT_FALSE(got.count({s, tag})) << s << " " << tag;
        continue;
      }
      const auto it = got.find({s, tag});
      ASSERT_NE(it, got.end()) << "step " << s << " lacks " << tag;
      const double want = m[key];
      EXPECT_NEAR(it->second, want, 1e-6 * std::max(1.0, std::abs(want))) << s << " " << tag;  // float32 on the wire
    }
    EXPECT_TRUE(got.count({s, "train/peak_memory_gib"}));
  }
  EXPECT_EQ(got.size(), 30u * 6 + 3);  // six series per step, validation at 10, 20, 30
}

TEST(RunReport, SeveralRunsShareOnePage) {
  test::TempDir dir;
  const fs::path run = dir / "stories-lora";
  ASSERT_EQ(train(run, 5, 0).code, 0);
  const fs::path copy = dir / "copy-of-run";
  fs::copy(run, copy, fs::copy_options::recursive);
  const auto r = test::run_cli_captured({"report", run.string(), copy.string(), "--out", (dir / "both.html").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string h = test::read_text(dir / "both.html");
  EXPECT_TRUE(test::contains(h, "<th>stories-lora</th><th>copy-of-run</th>"));
  EXPECT_TRUE(test::contains(h, "copy-of-run training smoothed"));
  const auto bad = test::run_cli_captured({"report", (dir / "nothing-here").string()});
  EXPECT_EQ(bad.code, 1);
  EXPECT_TRUE(test::contains(bad.err, "not a run folder (no metrics.jsonl)"));
}

}  // namespace
}  // namespace loft
