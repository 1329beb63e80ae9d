// A run folder (finetune's --out) is claimed before anything is trained into it: a second run
// must not replace another run's adapter and checkpoints or mix its metrics into the same
// metrics.jsonl. The folder is refused when it already holds a run, unless the command resumes
// that run or asks to overwrite it; temporaries left by interrupted writes (checkpoints/
// .tmp-step-* folders, *.tmp.<pid> files) are removed whenever the folder is claimed.
#pragma once
#include <filesystem>

namespace loft {

enum class RunFolderUse { fresh, resume, overwrite };

// Throws UsageError (exit 2) when `dir` is a file, or holds a run and `use` is fresh; Error when it
// cannot be created or written. With `overwrite`, removes the run's own entries (metrics.jsonl,
// run_config.json, checkpoints/, adapter/) and nothing else.
void claim_run_folder(const std::filesystem::path& dir, RunFolderUse use);

// Removes interrupted-write temporaries under `dir`; returns how many entries were removed.
int remove_stale_temporaries(const std::filesystem::path& dir);

}  // namespace loft
