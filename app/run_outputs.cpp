#include "app/run_outputs.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "app/resolved_config.h"
#include "engine/io/atomic_file.h"
#include "engine/io/folder_lock.h"
#include "report/html_report.h"

namespace loft::app {

namespace fs = std::filesystem;

std::shared_ptr<RunOutputOptions> add_run_output_options(CLI::App& cmd) {
  auto o = std::make_shared<RunOutputOptions>();
  o->command = &cmd;
  cmd.add_flag("--tensorboard", o->tensorboard, "write TensorBoard event files (scalars per step) to RUN/tb/");
  cmd.add_flag("--report,!--no-report", o->report, "write RUN/report.html at the end (default on)");
  return o;
}

namespace {

// RUN/<name> as a folder loft can write into: created when missing; a file or a link to nothing
// there is an Error naming it (a resumed run's tb/ or eval/ may be anything by now).
fs::path run_subfolder(const fs::path& run_dir, const std::string& name) {
  const fs::path dir = run_dir / name;
  std::error_code ec;
  const fs::file_status link = fs::symlink_status(dir, ec);
  if (fs::is_symlink(link) && !fs::exists(fs::status(dir, ec)))
    throw Error(cat(dir.string(), " is a link to nothing (", fs::read_symlink(dir, ec).string(),
                    "); remove it so loft can write ", name, "/ there"));
  if (fs::exists(link) && !fs::is_directory(fs::status(dir, ec)))
    throw Error(cat(dir.string(), " is a file, not a folder; remove it so loft can write ", name, "/ there"));
  fs::create_directories(dir, ec);
  if (ec) throw Error(cat(dir.string(), ": cannot create the folder (", ec.message(), ")"));
  return dir;
}

}  // namespace

RunOutputs::RunOutputs(const RunOutputOptions& options, fs::path run_dir)
    : options_(options), run_dir_(std::move(run_dir)) {
  if (options_.tensorboard) tb_.emplace(run_subfolder(run_dir_, "tb"));
}

void RunOutputs::write_config(const std::map<std::string, nlohmann::json>& resolved) const {
  std::map<std::string, std::string> values;
  for (const auto& [name, v] : resolved)
    if (!v.is_null()) values[name] = v.is_string() ? v.get<std::string>() : v.dump();
  write_file_atomic(run_dir_ / "config.yaml", resolved_config_yaml(*options_.command, values));
}

std::optional<fs::path> save_eval_in_run(const fs::path& adapter, const std::string& task, const nlohmann::json& report) {
  if (adapter.empty()) return std::nullopt;
  std::error_code ec;
  const fs::path run = fs::weakly_canonical(adapter, ec).parent_path();
  if (ec || !fs::exists(run / "run_config.json", ec)) return std::nullopt;
  // The run folder belongs to whoever holds its lock: a finetune that resumes it writes there, and
  // one that overwrites it removes eval/.
  std::optional<FolderLock> lock;
  try {
    lock.emplace(run, "evaluate", cat("run folder ", run.string()));
  } catch (const Error& e) {
    std::cerr << "loft: warning: the " << task << " report is not saved in " << (run / "eval").string() << ": "
              << e.what() << "\n";
    return std::nullopt;
  }
  const fs::path file = run_subfolder(run, "eval") / (task + ".json");
  write_file_atomic(file, report.dump(2) + "\n");
  return file;
}

report::Scalars step_scalars(const StepMetrics& m) {
  report::Scalars s = {{"train/loss", m.loss},
                       {"train/lr", m.lr},
                       {"train/grad_norm", m.grad_norm},
                       {"train/tokens_per_s", m.tokens_per_s},
                       {"train/step_seconds", m.seconds},
                       {"train/peak_memory_gib", double(m.peak_memory) / double(1 << 30)}};
  if (m.val_loss) s.emplace_back("val/loss", *m.val_loss);
  return s;
}

void RunOutputs::on_step(const StepMetrics& m) {
  if (tb_) tb_->write(m.step, step_scalars(m));
}

void RunOutputs::finish(const data::DataStats& stats) const {
  write_file_atomic(run_dir_ / "data_stats.json",
                    nlohmann::json{{"examples", stats.examples},
                                   {"truncated", stats.truncated},
                                   {"dropped_untrained", stats.dropped_untrained},
                                   {"skipped_bad", stats.skipped_bad},
                                   {"batches", stats.batches},
                                   {"trained_tokens", stats.trained_tokens},
                                   {"masked_tokens", stats.masked_tokens}}
                            .dump(2) + "\n");
  if (!options_.report) return;
  try {
    const fs::path out = run_dir_ / "report.html";
    report::write_report({run_dir_}, out);
    std::cout << "report written to " << out.string() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "warning: report.html not written: " << e.what() << "\n";
  }
}

}  // namespace loft::app
