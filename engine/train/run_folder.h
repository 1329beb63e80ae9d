// A run folder (finetune's --out) is loft's alone while a run writes it: it is claimed with the
// folder lock (engine/io/folder_lock.h), held for the whole run, so a second run into it is refused
// instead of interleaving metrics or racing checkpoints. Only an empty (or new) folder or one of
// loft's run folders is claimed: a folder holding other files, the root or the home folder never
// is. A run is refused where one already is, unless the command resumes it or asks to overwrite
// it. Temporaries that interrupted writes of the run left are removed on every claim — only those
// names, only where the run's writers make them (docs/reliability.md, "Paths and locks").
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "engine/io/folder_lock.h"

namespace loft {

enum class RunFolderUse { fresh, resume, overwrite };

// Written when a folder is first claimed: how loft recognises its run folders.
inline constexpr const char* kRunMarker = ".loft-run";

// The marker, or (runs made before it) metrics.jsonl or run_config.json.
bool is_run_folder(const std::filesystem::path& dir);

// Claims `dir` for a run of `command` and returns the lock: hold it until the run ends.
// UsageError (exit 2): `dir` is the root or the home folder, a file, an existing folder that is
// neither empty nor a loft run folder, or holds a run and `use` is fresh. Error (exit 1): another
// process holds it (naming its pid and start time), or it cannot be created or written. With
// `overwrite`, removes the run's own entries (metrics.jsonl, run_config.json, checkpoints/,
// adapter/, config.yaml, data_stats.json, report.html, tb/, eval/) and nothing else.
FolderLock claim_run_folder(const std::filesystem::path& dir, RunFolderUse use,
                            const std::string& command = "finetune");

// The name a checkpoint is written under before it is renamed to step-N: ".tmp-step-N-PID".
std::string checkpoint_temporary_name(int64_t step, int64_t pid);

// Removes what interrupted writes of a run left in `dir` and nothing else, never recursively: in
// the folder itself, adapter/ and eval/, the AtomicFile temporaries of files the run writes there;
// in checkpoints/, checkpoint_temporary_name() folders. Returns how many entries were removed.
// Only for a folder whose lock the caller holds.
int remove_stale_temporaries(const std::filesystem::path& dir);

}  // namespace loft
