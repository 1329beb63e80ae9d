#include "engine/train/run_folder.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "engine/core/error.h"

namespace loft {

namespace fs = std::filesystem;

namespace {

// What a run writes (the report's files and evaluate results saved in the folder included).
constexpr const char* kRunEntries[] = {"metrics.jsonl", "run_config.json", "checkpoints", "adapter", "config.yaml",
                                       "data_stats.json", "report.html", "tb", "eval"};

bool holds_run(const fs::path& dir) {
  for (const char* e : kRunEntries)
    if (fs::exists(dir / e)) return true;
  return false;
}

// "runs/latest" -> the first of "runs/latest-2", "runs/latest-3", ... that does not exist.
fs::path fresh_name(const fs::path& dir) {
  const fs::path base = dir.has_filename() ? dir : dir.parent_path();
  for (int n = 2;; ++n) {
    fs::path p = base;
    p += "-" + std::to_string(n);
    if (!fs::exists(p)) return p;
  }
}

// `name` is an atomic_file temporary ("<file>.tmp.<digits>").
bool is_atomic_temporary(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || at + 5 >= name.size()) return false;
  for (size_t i = at + 5; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return false;
  return true;
}

}  // namespace

int remove_stale_temporaries(const fs::path& dir) {
  std::vector<fs::path> stale;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && name.starts_with(".tmp-step-")) {
      stale.push_back(it->path());
      it.disable_recursion_pending();
    } else if (is_atomic_temporary(name)) {
      stale.push_back(it->path());
    }
  }
  for (const fs::path& p : stale) fs::remove_all(p);
  return int(stale.size());
}

void claim_run_folder(const fs::path& dir, RunFolderUse use) {
  const std::string name = dir.string();
  if (fs::exists(dir) && !fs::is_directory(dir))
    throw UsageError(cat("--out ", name, " is a file, not a folder; pick another --out"));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(cat("--out ", name, ": cannot create the folder (", ec.message(), ")"));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(cat("--out ", name, ": cannot write there (", std::strerror(errno), ")"));
  if (holds_run(dir)) {
    if (use == RunFolderUse::fresh)
      throw UsageError(cat("--out ", name, " already holds a run; continue it with --resume, ",
                           "replace it with --overwrite, or pick a fresh folder (e.g. --out ",
                           fresh_name(dir).string(), ")"));
    if (use == RunFolderUse::overwrite)
      for (const char* e : kRunEntries) fs::remove_all(dir / e);
  }
  remove_stale_temporaries(dir);
}

}  // namespace loft
