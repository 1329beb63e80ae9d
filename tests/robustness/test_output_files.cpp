// report --out, evaluate --report and evaluate --log-samples replace an existing file only when
// it is theirs (a loft report, loft's JSON report, loft's samples log) or an empty one, unless
// --overwrite; refusals come before any work, and every file around is left byte for byte.
#include <fstream>

#include "tests/common/cli_expect.h"
#include "tests/common/test_util.h"
#include "tests/robustness/bystanders.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> mmlu(std::vector<std::string> extra) {
  std::vector<std::string> a{"evaluate", "--model", test::data_path("models/stories260K-hf").string(),
                             "--task", "mmlu", "--data", test::data_path("mmlu").string(), "--subjects",
                             "marketing", "--limit", "1", "--shots", "1", "--device", "cpu"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(OutputFiles, ReportReplacesOnlyAReport) {
  test::TempDir dir;
  const fs::path run = dir / "run";
  ASSERT_EQ(test::run_cli_captured(test::finetune(run)).code, 0);
  test::Bystanders around;
  around.plant(dir.path());
  around.plant_file(dir / "page.html", "<!DOCTYPE html><title>my page</title>");
  const std::string page = (dir / "page.html").string();
  test::expect_one_line(test::run_cli_captured({"report", run.string(), "--out", page}), 2,
                        "--out " + page + " exists and is not a loft report; pass --overwrite");
  test::expect_one_line(test::run_cli_captured({"report", run.string(), "--out", dir.path().string()}), 2,
                        "is a folder; name a file");
  test::expect_one_line(test::run_cli_captured({"report", run.string(), "--out", (dir / "no" / "r.html").string()}),
                        2, "does not exist");
  EXPECT_TRUE(around.intact());
  // Its own: finetune's RUN/report.html, and a report written before.
  EXPECT_TRUE(test::contains(test::read_text(run / "report.html"), "<meta name=\"generator\" content=\"loft "));
  EXPECT_EQ(test::run_cli_captured({"report", run.string()}).code, 0);
  EXPECT_EQ(test::run_cli_captured({"report", run.string(), "--out", (dir / "r.html").string()}).code, 0);
  EXPECT_EQ(test::run_cli_captured({"report", run.string(), "--out", (dir / "r.html").string()}).code, 0);
  std::ofstream(dir / "empty.html").close();
  EXPECT_EQ(test::run_cli_captured({"report", run.string(), "--out", (dir / "empty.html").string()}).code, 0);
  EXPECT_TRUE(around.intact());
  const auto forced = test::run_cli_captured({"report", run.string(), "--out", page, "--overwrite"});
  EXPECT_EQ(forced.code, 0) << forced.err;
  EXPECT_TRUE(test::contains(test::read_text(page), "loft run report"));
}

TEST(OutputFiles, EvaluateReplacesOnlyItsOwnReportAndSamples) {
  test::TempDir dir;
  test::Bystanders around;
  around.plant(dir.path());
  around.plant_file(dir / "results.json", R"({"task": "mine", "score": 1})");
  around.plant_file(dir / "samples.jsonl", "{\"task\": \"mine\"}\n");
  const std::string report = (dir / "results.json").string(), samples = (dir / "samples.jsonl").string();
  test::expect_one_line(test::run_cli_captured(mmlu({"--report", report})), 2,
                        "--report " + report + " exists and is not a loft evaluate report");
  test::expect_one_line(test::run_cli_captured(mmlu({"--log-samples", samples})), 2,
                        "--log-samples " + samples + " exists and is not a loft samples log");
  EXPECT_TRUE(around.intact());
  // Its own files are replaced without asking.
  const std::string own_report = (dir / "own.json").string(), own_samples = (dir / "own.jsonl").string();
  for (int i = 0; i < 2; ++i) {
    const auto r = test::run_cli_captured(mmlu({"--report", own_report, "--log-samples", own_samples}));
    ASSERT_EQ(r.code, 0) << r.err;
  }
  EXPECT_EQ(nlohmann::json::parse(test::read_text(own_report))["task"], "mmlu");
  EXPECT_EQ(test::read_jsonl(own_samples).size(), 1u);
  EXPECT_TRUE(around.intact());
  const auto forced = test::run_cli_captured(mmlu({"--report", report, "--log-samples", samples, "--overwrite"}));
  ASSERT_EQ(forced.code, 0) << forced.err;
  EXPECT_EQ(nlohmann::json::parse(test::read_text(report))["task"], "mmlu");
}

}  // namespace
}  // namespace loft
