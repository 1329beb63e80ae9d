// What a finetune run leaves for people beside metrics.jsonl and the adapter: the resolved
// configuration as a recipe (config.yaml), data statistics (data_stats.json), TensorBoard event
// files (tb/, with --tensorboard) and the HTML report (report.html, unless --no-report).
// finetune registers the options with add_run_output_options and calls RunOutputs at three points.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "app/cli_fwd.h"
#include "datasets/data_loader.h"
#include "engine/train/trainer.h"
#include "report/tensorboard.h"

namespace loft::app {

struct RunOutputOptions {
  bool tensorboard = false;
  bool report = true;
  const CLI::App* command = nullptr;  // whose options config.yaml records
};
// Adds --tensorboard and --report/--no-report to `cmd`.
std::shared_ptr<RunOutputOptions> add_run_output_options(CLI::App& cmd);

class RunOutputs {
 public:
  RunOutputs(const RunOutputOptions& options, std::filesystem::path run_dir);
  // RUN/config.yaml. `resolved`: values the run decided for options not given (long option
  // name -> value; null entries are skipped), e.g. {"lr", 2e-4} from the method's defaults.
  void write_config(const std::map<std::string, nlohmann::json>& resolved) const;
  // Each step's scalars to TensorBoard (when on).
  void on_step(const StepMetrics& m);
  // RUN/data_stats.json and RUN/report.html. A report that cannot be written is a warning on
  // stderr: the trained adapter is already saved.
  void finish(const data::DataStats& stats) const;

 private:
  RunOutputOptions options_;
  std::filesystem::path run_dir_;
  std::optional<report::TensorBoardWriter> tb_;
};

// `loft evaluate --adapter RUN/adapter` keeps its report beside the run, as RUN/eval/<task>.json
// (replacing an earlier one of the task), where `loft report` finds it. Returns the file, or
// nothing when the adapter's parent is not a finetune run folder (no run_config.json) or another
// process holds the run folder's lock (a finetune resuming or overwriting it: a warning on stderr
// names it, and the evaluation's own output is unaffected).
std::optional<std::filesystem::path> save_eval_in_run(const std::filesystem::path& adapter, const std::string& task,
                                                      const nlohmann::json& report);

// The TensorBoard scalars of one step: train/loss, train/lr, train/grad_norm, train/tokens_per_s,
// train/step_seconds, train/peak_memory_gib and, on evaluation steps, val/loss.
report::Scalars step_scalars(const StepMetrics& m);

}  // namespace loft::app
