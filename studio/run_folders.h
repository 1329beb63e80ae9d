// Run folders as the studio lists them: every folder directly under --runs that holds a run
// (made by the CLI or the studio), read from its files, so a restarted studio and the CLI see the
// same runs. A run's status when no studio job of this process runs it comes from the files: the
// folder lock (running), the studio's recorded outcome (RUN/studio-job.json, when newer than the
// metrics), else the steps done against the steps planned and the checkpoints left.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/io/folder_lock.h"

namespace loft::studio {

// How a studio job of a run ended, kept in RUN/studio-job.json for a later studio.
struct RunOutcome {
  std::string status;  // finished, failed or stopped
  std::string error;
  double ended_at = 0;
};
void save_run_outcome(const std::filesystem::path& run_dir, const RunOutcome& outcome);

// Files the studio writes into a run folder beside finetune's.
inline constexpr const char* kStudioRecipe = "studio-recipe.yaml";
inline constexpr const char* kStudioLog = "studio.log";

struct RunFolder {
  std::filesystem::path dir;
  std::string id;                  // the folder's name
  nlohmann::json config;           // run_config.json, or null
  nlohmann::json last_metrics;     // the last complete metrics.jsonl line, or null
  int64_t newest_checkpoint = -1;  // step of the newest checkpoints/step-N, -1 when none
  bool has_adapter = false;
  std::optional<LockHolder> lock_holder;      // while a process holds RUN/.loft.lock
  std::optional<RunOutcome> outcome;          // the studio's record, when newer than the metrics
  double started = 0;              // seconds since the epoch: the lock's start, else the folder's oldest file
};

// Whether `dir` holds a run (or a run the studio is about to start).
bool is_run_folder(const std::filesystem::path& dir);
// Every run folder directly under `runs`, newest first.
std::vector<std::filesystem::path> list_run_folders(const std::filesystem::path& runs);
// The folder of run `id` under `runs`: HttpError 404 unless `id` is one plain folder name of a run.
std::filesystem::path run_dir_of(const std::filesystem::path& runs, const std::string& id);

RunFolder read_run_folder(const std::filesystem::path& dir);
// The parsed lines of RUN/metrics.jsonl from line `line` on (a torn line is skipped, a last line
// without its newline is left for later); `line` moves past what was read.
std::vector<nlohmann::json> read_metrics(const std::filesystem::path& dir, size_t& line);
// The last `bytes` of a file (empty when it cannot be read).
std::string file_tail(const std::filesystem::path& file, size_t bytes);
// The status of a run no job of this studio is running: running, finished, stopped or failed.
std::string status_from_files(const RunFolder& run);
// The run's summary for GET /api/runs: id, dir, name, step, steps, loss, method, model, started.
nlohmann::json run_summary(const RunFolder& run);

}  // namespace loft::studio
