#include "engine/train/run_folder.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/core/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/json_read.h"
#include "engine/io/output_paths.h"

namespace loft {

namespace fs = std::filesystem;

namespace {

// What a run writes (the report's files and evaluate results saved in the folder included).
constexpr const char* kRunEntries[] = {"metrics.jsonl", "run_config.json", "checkpoints", "adapter", "config.yaml",
                                       "data_stats.json", "report.html", "tb", "eval"};
// The files written whole (AtomicFile) in the folder itself and in adapter/.
const std::vector<std::string> kTopFiles = {"metrics.jsonl", "run_config.json", "config.yaml", "data_stats.json",
                                            "report.html", kRunMarker};
const std::vector<std::string> kAdapterFiles = {"adapter_config.json", "adapter_model.safetensors",
                                                "loft_state.safetensors", "generation_config.json"};

bool exists_entry(const fs::path& p) {  // a dangling symlink counts
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

bool holds_run(const fs::path& dir) {
  return std::any_of(std::begin(kRunEntries), std::end(kRunEntries),
                     [&](const char* e) { return exists_entry(dir / e); });
}

// The first entry of `dir` that is not loft's lock or marker (or the marker being written by a
// run claiming the folder this moment), or "" when there is none.
std::string foreign_entry(const fs::path& dir, const std::string& what) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name != kFolderLockFile && name != kRunMarker && atomic_file_target(name) != kRunMarker) return name;
  }
  if (ec) throw Error(cat(what, ": cannot list the folder (", ec.message(), ")"));
  return "";
}

// "runs/latest" -> the first of "runs/latest-2", "runs/latest-3", ... that does not exist.
fs::path fresh_name(const fs::path& dir) {
  const fs::path base = dir.has_filename() ? dir : dir.parent_path();
  for (int n = 2;; ++n) {
    fs::path p = base;
    p += cat("-", n);
    if (!exists_entry(p)) return p;
  }
}

bool is_checkpoint_temporary(const std::string& name) {
  constexpr std::string_view prefix = ".tmp-step-";
  if (!name.starts_with(prefix)) return false;
  const std::string_view rest = std::string_view(name).substr(prefix.size());
  const size_t dash = rest.find('-');
  const auto digits = [](std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  return dash != std::string_view::npos && digits(rest.substr(0, dash)) && digits(rest.substr(dash + 1));
}

// The entries of `folder` (not recursing) that `ours` picks, removed; returns how many.
int sweep(const fs::path& folder, const std::function<bool(const fs::directory_entry&)>& ours) {
  std::vector<fs::path> stale;
  std::error_code ec;
  for (auto it = fs::directory_iterator(folder, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (ours(*it)) stale.push_back(it->path());
  int removed = 0;
  for (const fs::path& p : stale) removed += fs::remove_all(p, ec) > 0 ? 1 : 0;
  return removed;
}

// A regular file that is an AtomicFile temporary of one of `files` (or, with no list, of a *.json).
std::function<bool(const fs::directory_entry&)> temporary_of(const std::vector<std::string>* files) {
  return [files](const fs::directory_entry& e) {
    std::error_code ec;
    if (!e.is_regular_file(ec) || e.is_symlink(ec)) return false;
    const std::optional<std::string> target = atomic_file_target(e.path().filename().string());
    if (!target) return false;
    return files ? std::find(files->begin(), files->end(), *target) != files->end() : target->ends_with(".json");
  };
}

}  // namespace

bool is_run_folder(const fs::path& dir) {
  return exists_entry(dir / kRunMarker) || exists_entry(dir / "metrics.jsonl") ||
         exists_entry(dir / "run_config.json");
}

std::string checkpoint_temporary_name(int64_t step, int64_t pid) { return cat(".tmp-step-", step, "-", pid); }

int remove_stale_temporaries(const fs::path& dir) {
  int removed = sweep(dir, temporary_of(&kTopFiles));
  removed += sweep(dir / "adapter", temporary_of(&kAdapterFiles));
  removed += sweep(dir / "eval", temporary_of(nullptr));
  removed += sweep(dir / "checkpoints", [](const fs::directory_entry& e) {
    std::error_code ec;
    return !e.is_symlink(ec) && e.is_directory(ec) && is_checkpoint_temporary(e.path().filename().string());
  });
  return removed;
}

FolderLock claim_run_folder(const fs::path& dir, RunFolderUse use, const std::string& command) {
  const std::string name = dir.string(), what = cat("--out ", name);
  checked_output_path(dir, "--out");
  std::error_code ec;
  const fs::file_status st = output_status(dir, what);
  if (fs::exists(st) && !fs::is_directory(st))
    throw UsageError(cat(what, " is a file, not a folder; pick another --out"));
  if (fs::is_directory(st) && !is_run_folder(dir))
    if (const std::string other = foreign_entry(dir, what); !other.empty())
      throw UsageError(cat(what, " is not a loft run folder and not empty (it holds ", brief(other),
                           "); a run goes into a new or empty folder, or continues a loft run folder"));
  fs::create_directories(dir, ec);
  if (ec) throw Error(cat(what, ": cannot create the folder (", ec.message(), ")"));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(cat(what, ": cannot write there (", std::strerror(errno), ")"));
  FolderLock lock(dir, command, what);
  // Decided under the lock: a run that ended a moment ago is a run.
  if (holds_run(dir)) {
    if (use == RunFolderUse::fresh)
      throw UsageError(cat(what, " already holds a run; continue it with --resume, ",
                           "replace it with --overwrite, or pick a fresh folder (e.g. --out ",
                           fresh_name(dir).string(), ")"));
    if (use == RunFolderUse::overwrite)
      for (const char* e : kRunEntries) {
        fs::remove_all(dir / e, ec);
        if (ec) throw Error(cat(what, ": cannot remove ", (dir / e).string(), " (", ec.message(), ")"));
      }
  }
  if (!exists_entry(dir / kRunMarker))
    write_file_atomic(dir / kRunMarker, nlohmann::ordered_json{{"created_by", cat("loft ", command)},
                                                               {"created", utc_now_iso8601()}}.dump() + "\n");
  remove_stale_temporaries(dir);
  return lock;
}

}  // namespace loft
