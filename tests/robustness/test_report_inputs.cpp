// `loft report` on hostile run folders: every string a run's files hold is escaped in the page
// (one escaping function, report/html_text.h), keys that are JSON-pointer specials ('~', '/') are
// shown as they are, and corrupt files are errors naming the file and line or field: never an
// empty report, a dropped row or a library's exception. A killed run's torn last line still gives
// a report, with a warning.
#include <regex>

#include "tests/robustness/robustness_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::expect_failure;

const std::string kImg = "<img src=x onerror=alert(1)>";
const std::string kQuote = "\"'><script>alert(2)</script>";

std::string metrics_lines(int steps) {
  std::string m;
  for (int s = 1; s <= steps; ++s)
    m += json{{"step", s}, {"loss", 2.0 / s}, {"lr", 1e-3}, {"grad_norm", 0.5}, {"tokens_per_s", 100.0},
              {"step_seconds", 0.1}, {"peak_memory", 1 << 20}, {kImg, kQuote}}
             .dump() + "\n";
  return m;
}

// A run folder whose every string field, key and file name is a payload.
fs::path hostile_run(const fs::path& parent, const std::string& name) {
  const fs::path run = parent / name;
  test::write_file(run / "metrics.jsonl", metrics_lines(3));
  json cfg;
  for (const char* k : {"model", "method", "rank", "alpha", "lr", "schedule", "warmup", "steps", "batch", "micro_batch",
                        "seq", "seed", "device", "data_parallel_ranks", "chat_template"})
    cfg[k] = kImg + kQuote;
  cfg["targets"] = {kImg, kQuote};
  cfg["stop_ids"] = {kQuote};
  cfg["method_record"] = {{"method", kImg},
                          {"lora", {{kImg, kQuote}, {"a~0b", kImg}, {"c/d", kQuote}, {"~1", 1}}},
                          {kQuote, {{"x", kImg}}}};
  cfg[kImg] = kQuote;
  test::write_file(run / "run_config.json", cfg.dump());
  test::write_file(run / "config.yaml", "model: " + kImg + "\n" + kQuote + ": 1\n");
  test::write_file(run / "data_stats.json", json{{"examples", 3}, {"trained_tokens", 10}, {"masked_tokens", 5},
                                                 {kImg, kQuote}}.dump());
  const json eval{{"task", kImg},
                  {"protocol", {{"shots", kQuote}, {"limit", kImg}}},
                  {"metrics", {{kImg, 0.5}, {"acc", 0.25}, {"correct", 1}, {"questions", 4},
                               {"categories", {{kQuote, {{"acc", 0.5}, {"correct", 1}, {"questions", 2}}}}},
                               {"nested", {{kQuote, {{kImg, 3}}}}}}}};
  test::write_file(run / "eval" / (kImg + ".json"), eval.dump());
  test::write_file(run / (kQuote.substr(0, 12) + ".json"), json{{"task", kQuote}, {"metrics", {{kImg, 1}}}}.dump());
  return run;
}

TEST(Robustness, ReportEscapesEveryFieldOfEveryFile) {
  test::TempDir dir;
  const fs::path a = hostile_run(dir.path(), kImg), b = hostile_run(dir.path(), "b" + kQuote.substr(0, 3));
  for (const std::vector<fs::path>& runs : {std::vector<fs::path>{a}, std::vector<fs::path>{a, b}}) {
    const fs::path page = dir / "page.html";
    std::vector<std::string> args{"report"};
    for (const auto& r : runs) args.push_back(r.string());
    args.insert(args.end(), {"--out", page.string()});
    const test::BinaryResult r = test::run_loft(args);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string h = test::read_text(page);
    EXPECT_FALSE(test::contains(h, kImg));
    EXPECT_FALSE(test::contains(h, kQuote));
    EXPECT_FALSE(std::regex_search(h, std::regex("<(img|script)", std::regex::icase)));
    EXPECT_FALSE(test::contains(h, "'>"));
    // The method record's rows are all there, keys with '~' and '/' included, escaped.
    for (const char* row : {"lora.&lt;img src=x onerror=alert(1)&gt;", "lora.a~0b", "lora.c/d", "lora.~1",
                            "&quot;&#39;&gt;&lt;script&gt;alert(2)&lt;/script&gt;.x"})
      EXPECT_TRUE(test::contains(h, std::string("<th>") + row + "</th>"));
    EXPECT_TRUE(test::contains(h, "&lt;img src=x onerror=alert(1)&gt;"));  // shown, escaped
  }
}

std::vector<std::string> report(const fs::path& run) { return {"report", run.string(), "--out", (run / "r.html").string()}; }

TEST(Robustness, CorruptMetricsAreErrorsNamingTheLine) {
  test::TempDir dir;
  const fs::path run = dir / "run", metrics = run / "metrics.jsonl";
  const std::string three = metrics_lines(3);
  test::write_file(metrics, three.substr(0, three.find('\n') + 1) + "{\"step\": 2, \"lo\n" + three.substr(three.find('\n') + 1));
  expect_failure(report(run), 1, {metrics.string() + ":2", "not a metrics line"});
  test::write_file(metrics, three + "[1, 2]\n" + three);
  expect_failure(report(run), 1, {metrics.string() + ":4", "not an object"});
  test::write_file(metrics, "\x7f" "ELF\x02\x01\x01 garbage \x01\x02\x03");
  expect_failure(report(run), 1, {metrics.string() + ":1", "not a metrics line"});
  test::write_file(metrics, "");
  expect_failure(report(run), 1, {metrics.string(), "holds no training step"});
  test::write_file(metrics, "{\"step\": \"x\", \"loss\": 1, \"lr\": 1, \"grad_norm\": 1}\n");
  expect_failure(report(run), 1, {metrics.string() + ":1", "step"});
}

TEST(Robustness, TornLastMetricsLineIsAWarning) {
  test::TempDir dir;
  const fs::path run = dir / "run";
  test::write_file(run / "metrics.jsonl", metrics_lines(3) + "{\"step\": 4, \"loss\": 1.");
  const test::BinaryResult r = test::run_loft(report(run));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.err, "warning: " + (run / "metrics.jsonl").string() + ":4"));
  EXPECT_TRUE(test::contains(r.err, "ends at step 3"));
  EXPECT_TRUE(fs::exists(run / "r.html"));
}

// RUN/eval/ holds evaluate's reports only: a file there that is not one is named in a warning,
// and the page is written without it.
TEST(Robustness, UnreadableEvalReportsAreWarnings) {
  test::TempDir dir;
  const fs::path run = dir / "run";
  test::write_file(run / "metrics.jsonl", metrics_lines(3));
  test::write_file(run / "eval" / "mmlu.json", "{\"task\": \"mmlu\", \"metrics\": {\"acc\": ");
  test::write_file(run / "eval" / "notes.json", "[1, 2]");
  const test::BinaryResult r = test::run_loft(report(run));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.err, "warning: " + (run / "eval" / "mmlu.json").string() + ": skipped, not readable"));
  EXPECT_TRUE(test::contains(r.err, "warning: " + (run / "eval" / "notes.json").string() + ": skipped, not an evaluation report"));
  EXPECT_TRUE(fs::exists(run / "r.html"));
}

TEST(Robustness, WrongTypedRunFilesAreErrorsNamingTheField) {
  test::TempDir dir;
  const fs::path run = dir / "run";
  test::write_file(run / "metrics.jsonl", metrics_lines(2));
  test::write_file(run / "data_stats.json", R"({"examples": 3, "trained_tokens": "many", "masked_tokens": 5})");
  expect_failure(report(run), 1, {"data_stats.json", "field trained_tokens"});
  test::write_file(run / "data_stats.json", R"({"examples": -3})");
  expect_failure(report(run), 1, {"data_stats.json", "field examples"});
  test::write_file(run / "data_stats.json", "[1, 2]");
  expect_failure(report(run), 1, {"data_stats.json", "not a JSON object"});
  fs::remove(run / "data_stats.json");
  test::write_file(run / "run_config.json", "5");
  expect_failure(report(run), 1, {"run_config.json", "not a JSON object"});
}

}  // namespace
}  // namespace loft
