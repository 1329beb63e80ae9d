// A run folder as the report reads it: metrics.jsonl (one line per optimizer step), run_config.json
// and config.yaml (what ran), data_stats.json (what the data loader saw) and every `loft evaluate`
// report saved in it (RUN/eval/*.json, or any RUN/*.json holding "task" and "metrics").
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace loft::report {

struct MetricPoint {
  int64_t step = 0;
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0, seconds = 0;
  std::optional<double> peak_memory;  // bytes (runs before it was logged have none)
  std::optional<double> val_loss;     // on evaluation steps
};

struct EvalReport {
  std::string file;      // relative to the run folder
  nlohmann::json json;   // what `loft evaluate --report` wrote
};

struct RunData {
  std::filesystem::path dir;
  std::string name;                 // the folder's name, for legends and table headers
  std::vector<MetricPoint> metrics;
  nlohmann::json run_config;        // null when absent
  std::string config_yaml;          // "" when absent
  nlohmann::json data_stats;        // null when absent
  std::vector<EvalReport> evals;
  std::vector<std::string> warnings;  // what was read around (a killed run's torn last metrics line)
};

// The data_stats.json counts the report shows; each must be an integer of at least 0.
inline constexpr const char* kDataStatCounts[] = {"examples", "trained_tokens", "masked_tokens", "truncated",
                                                  "dropped_untrained", "skipped_bad", "batches"};

// Throws loft::Error when `dir` is not a run folder (no metrics.jsonl, or one without a step) or
// a file in it is malformed (a metrics line that is not a step's JSON object, unless it is the
// torn last line: a warning; run_config.json not an object; a data_stats.json count of a
// wrong type).
RunData load_run(const std::filesystem::path& dir);

}  // namespace loft::report
