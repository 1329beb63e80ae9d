// The HTML report from run folders written here: its sections, numbers and curves, several runs
// side by side, escaping, and self-containment (no scripts, nothing fetched).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "engine/core/error.h"
#include "report/html_report.h"
#include "report/html_text.h"
#include "report/svg_chart.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A run folder as finetune leaves it: 20 steps, validation every 10, an MMLU report.
fs::path make_run(const fs::path& dir, const std::string& method, double loss0) {
  std::string metrics;
  for (int s = 1; s <= 20; ++s) {
    metrics += "{\"step\":" + std::to_string(s) + ",\"loss\":" + std::to_string(loss0 / s) +
               ",\"lr\":0.001,\"grad_norm\":0.5,\"tokens\":100,\"tokens_per_s\":1234.5,\"step_seconds\":0.25,"
               "\"peak_memory\":" + std::to_string(3 << 20);
    if (s % 10 == 0) metrics += ",\"val_loss\":" + std::to_string(1.5 + 1.0 / s);
    metrics += "}\n";
  }
  metrics += "{\"step\":21,\"lo";  // the torn last line of a killed run is ignored
  write(dir / "metrics.jsonl", metrics);
  write(dir / "run_config.json",
        R"({"model":"m/<tiny>","method":")" + method + R"(","rank":8,"alpha":16,"targets":["q_proj","v_proj"],
            "lr":0.001,"schedule":"cosine","warmup":2,"steps":20,"batch":4,"seq":64,"device":"cpu",
            "method_record":{"method":")" + method + R"(","halo":{"level":2,"format":"fp8"}}})");
  write(dir / "config.yaml", "model: m/<tiny>\nlora_rank: 8\n");
  write(dir / "data_stats.json",
        R"({"examples":120,"trained_tokens":3000,"masked_tokens":9000,"truncated":7,"dropped_untrained":1,"skipped_bad":0,"batches":80})");
  write(dir / "eval" / "mmlu.json", R"({"task":"mmlu","protocol":{"shots":5,"limit":null},"metrics":{
        "acc":0.25,"correct":3,"questions":12,"acc_subject_mean":0.25,
        "categories":{"stem":{"acc":0.5,"correct":2,"questions":4},"humanities":{"acc":0.125,"correct":1,"questions":8}},
        "subjects":{"anatomy":{"acc":0.5,"correct":2,"questions":4}}}})");
  write(dir / "eval" / "notes.json", R"({"not":"an evaluate report"})");
  return dir;
}

TEST(HtmlReport, OneRunHoldsEverySection) {
  test::TempDir dir;
  const fs::path run = make_run(dir / "halo-run", "halo", 4.0);
  report::write_report({run}, dir / "r.html");
  const std::string h = test::read_text(dir / "r.html");
  for (const char* part :
       {"<!DOCTYPE html>", "prefers-color-scheme: dark", "<h2>Summary</h2>", "<h2>Curves</h2>", "<h2>Evaluation</h2>",
        "<h2>Method</h2>", "<h2>Data</h2>", "<h2>Configuration</h2>", "halo-run", "m/&lt;tiny&gt;",
        "0.001 cosine, warmup 2", "best validation loss", "1.5500 <span class=\"muted\">(step 20)",
        "3.0 MiB", "5.0 s", "Learning rate", "Gradient norm", "Tokens/s", "Peak memory (MiB)",
        "mmlu 5-shot · acc", "0.2500 <span class=\"muted\">(3/12)", "mmlu 5-shot · categories · stem",
        "0.5000 <span class=\"muted\">(2/4)", "halo.level", "q_proj, v_proj", "3,000", "9,000", "25.0%",
        "lora_rank: 8"})
    EXPECT_TRUE(test::contains(h, part));
  EXPECT_FALSE(test::contains(h, "anatomy")) << "subjects stay out of the table";
  EXPECT_FALSE(test::contains(h, "an evaluate report"));
  EXPECT_FALSE(test::contains(h, "<script"));
  EXPECT_FALSE(std::regex_search(h, std::regex("(src|href)=\"(https?:)?//"))) << "the page fetches nothing";
  // Training loss raw (faint) and smoothed, validation dashed with a dot per evaluation.
  EXPECT_TRUE(test::contains(h, "class=\"line s0 faint\""));
  EXPECT_TRUE(test::contains(h, "class=\"line s0 dashed\""));
  EXPECT_TRUE(test::contains(h, "halo-run validation step 10: 1.6</title></circle>"));
}

TEST(HtmlReport, SeveralRunsOverlayAndCompare) {
  test::TempDir dir;
  make_run(dir / "a", "lora", 4.0);
  make_run(dir / "b", "qlora", 6.0);
  report::write_report({dir / "a", dir / "b"}, dir / "cmp.html");
  const std::string h = test::read_text(dir / "cmp.html");
  EXPECT_TRUE(test::contains(h, "<thead><tr><th></th><th>a</th><th>b</th></tr></thead>"));
  EXPECT_TRUE(test::contains(h, "<tr><th>method</th><td>lora</td><td>qlora</td></tr>"));
  EXPECT_TRUE(test::contains(h, "class=\"line s1\""));  // the second run's smoothed curve
  EXPECT_TRUE(test::contains(h, "runs a, b"));
}

TEST(HtmlReport, MissingRunFolderIsAnError) {
  test::TempDir dir;
  try {
    report::write_report({dir / "nope"}, dir / "r.html");
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "not a run folder"));
  }
  EXPECT_FALSE(fs::exists(dir / "r.html"));
}

TEST(SvgChart, SmoothingAxesAndEmptyCharts) {
  const report::Points raw = {{1, 1.0}, {2, 3.0}, {3, 3.0}};
  const report::Points s = report::ema_smooth(raw, 0.5);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_DOUBLE_EQ(s[0].second, 1.0);  // debiased: the first point is itself
  EXPECT_DOUBLE_EQ(s[1].second, (0.5 * 0.5 + 0.5 * 3.0) / (1 - 0.25));
  const std::string svg = report::svg_line_chart({"Loss <1>", {{"run", raw, 3}}});
  EXPECT_TRUE(test::contains(svg, "<title>Loss &lt;1&gt;</title>"));
  EXPECT_TRUE(test::contains(svg, "class=\"line s3\""));
  EXPECT_TRUE(test::contains(svg, ">step</text>"));
  EXPECT_TRUE(test::contains(report::svg_line_chart({"Empty", {}}), ">no data</text>"));
  EXPECT_EQ(report::short_number(3074.2), "3074");
  EXPECT_EQ(report::short_number(1234567), "1.23M");
  EXPECT_EQ(report::short_number(2e-5), "2e-05");
  EXPECT_EQ(report::html_escape("<a href='x'>&</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;");
}

}  // namespace
}  // namespace loft
