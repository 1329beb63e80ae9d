// loft report RUN... [--out FILE.html]: the HTML report of one run, or of several side by side
// (overlaid curves, one table column per run). finetune writes RUN/report.html itself at the end.
// An existing file that is not a loft report is replaced only with --overwrite.
#include <CLI/CLI.hpp>
#include <iostream>

#include "app/commands.h"
#include "app/owned_outputs.h"
#include "engine/io/atomic_file.h"
#include "engine/io/output_paths.h"
#include "report/html_report.h"

namespace loft::app {

namespace {

struct ReportOptions {
  std::vector<std::string> runs;
  std::string out;
  bool overwrite = false;
};

void run_report(const ReportOptions& o) {
  std::vector<std::filesystem::path> dirs(o.runs.begin(), o.runs.end());
  const std::filesystem::path out =
      !o.out.empty() ? std::filesystem::path(o.out) : dirs.size() == 1 ? dirs[0] / "report.html" : "report.html";
  const std::vector<report::RunData> runs = report::load_runs(dirs);  // first: a missing run is the error to name
  check_output_file(out, "--out", o.overwrite, is_loft_report_html, "a loft report");
  write_file_atomic(out, report::render_report(runs));
  std::cout << "report written to " << out.string() << "\n";
}

}  // namespace

void add_report_command(CLI::App& root) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* cmd = root.add_subcommand("report", "HTML report of finetune runs: curves, config, data, evaluations");
  cmd->add_option("runs", o->runs, "run folders (finetune --out); several are compared side by side")->required();
  cmd->add_option("--out", o->out, "the HTML file (default: RUN/report.html for one run, ./report.html for several)");
  cmd->add_flag("--overwrite", o->overwrite, "replace an existing --out file that is not a loft report");
  cmd->callback([o] { run_report(*o); });
}

}  // namespace loft::app
