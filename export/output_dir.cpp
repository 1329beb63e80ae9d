#include "export/output_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "engine/core/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/json_read.h"
#include "engine/io/output_paths.h"

namespace loft::exporter {

namespace fs = std::filesystem;

namespace {

// ".<name>.loft-tmp-<pid>": an export being written; ".<name>.loft-old-<pid>": the export it
// replaces, for the moment between two renames where the file system cannot exchange folders.
constexpr std::string_view kTemporaryTags[] = {".loft-tmp-", ".loft-old-"};

fs::path temporary_path(const fs::path& out, std::string_view tag) {
  return out.parent_path() / cat(".", out.filename().string(), tag, ::getpid());
}

struct Temporary {
  std::string target;  // the --out name it was written for
  pid_t pid = 0;
};

std::optional<Temporary> parse_temporary(const std::string& name) {
  if (!name.starts_with(".")) return std::nullopt;
  for (const std::string_view tag : kTemporaryTags) {
    const size_t at = name.rfind(tag);
    if (at == std::string::npos || at < 2) continue;
    const std::string digits = name.substr(at + tag.size());
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    return Temporary{name.substr(1, at - 1), pid_t(std::stol(digits))};
  }
  return std::nullopt;
}

bool process_alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

bool has(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

// Before `a` in the order exports into one --out are admitted: the earlier start, then the lower pid.
bool earlier(const LockHolder& a, const LockHolder& b) {
  return a.started != b.started ? a.started < b.started : a.pid < b.pid;
}

std::string what(const fs::path& out) { return "--out " + out.string(); }

// Removes a dead export's temporary with its marker last, so that a cleaner killed midway leaves
// a folder the next one still recognises (or an empty one). Returns whether it is gone.
bool remove_dead_export(const fs::path& dir) {
  std::vector<fs::path> entries;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->path().filename() != kExportMarker) entries.push_back(it->path());
  for (const fs::path& e : entries) fs::remove_all(e, ec);
  fs::remove(dir / kExportMarker, ec);
  return fs::remove(dir, ec);
}

}  // namespace

OutputDir::OutputDir(const fs::path& out, bool overwrite, std::ostream& log, std::optional<FileOut> file)
    : out_(checked_output_path(out, "--out")), overwrite_(overwrite), file_(std::move(file)) {
  std::error_code ec;
  const fs::file_status st = output_status(out_, what(out_));
  if (fs::exists(st)) {
    if (file_ && fs::is_directory(st))
      throw UsageError(cat(what(out_), " is a folder; a path ending in .gguf names the file to write"));
    if (!file_ && !fs::is_directory(st)) throw UsageError(cat(what(out_), " exists and is not a folder"));
    if (!overwrite) throw UsageError(cat(what(out_), " already exists (pass --overwrite to replace it)"));
    if (file_ && !file_->replaceable(out_))
      throw UsageError(cat(what(out_), " is not ", file_->kind, "; --overwrite replaces only ", file_->kind,
                           " (an earlier export): remove it yourself or pick another --out"));
    if (!file_ && !has(out_ / kExportMarker))
      throw UsageError(cat(what(out_), " is not a loft export (it has no ", kExportMarker,
                           "); --overwrite replaces only a folder loft export wrote: remove it yourself or pick another --out"));
    if (!file_)
      if (const std::optional<LockHolder> h = folder_lock_holder(out_))
        throw Error(cat(what(out_), " is in use by ", h->describe(), "; wait for it to end"));
  }
  if (!fs::is_directory(out_.parent_path(), ec))
    throw UsageError(cat(what(out_), ": its parent folder does not exist or is not a folder"));
  tmp_ = temporary_path(out_, kTemporaryTags[0]);
  try {
    claim_temporary(log);
  } catch (...) {
    lock_.reset();
    fs::remove_all(tmp_, ec);
    throw;
  }
}

// Makes the temporary (marker, then lock), refuses when an earlier export is writing the same
// --out, and removes the temporaries of dead exports in the parent folder.
void OutputDir::claim_temporary(std::ostream& log) {
  std::error_code ec;
  fs::remove_all(tmp_, ec);  // this pid's own, from a process long gone
  if (!fs::create_directory(tmp_, ec) || ec)
    throw Error(cat(what(out_), ": cannot create ", tmp_.string(), " (",
                    ec ? ec.message() : std::string("it exists"), ")"));
  write_file_atomic(tmp_ / kExportMarker, nlohmann::ordered_json{{"created_by", "loft export"},
                                                                 {"target", out_.filename().string()}}.dump() + "\n");
  lock_.emplace(tmp_, "export", what(out_));
  std::vector<fs::path> dead;
  for (auto it = fs::directory_iterator(out_.parent_path(), ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const fs::path p = it->path();
    const std::optional<Temporary> t = parse_temporary(p.filename().string());
    if (!t || p == tmp_ || it->is_symlink(ec) || !it->is_directory(ec)) continue;
    if (const std::optional<LockHolder> h = folder_lock_holder(p)) {
      if (t->target == out_.filename().string() && earlier(*h, lock_->holder()))
        throw Error(cat(what(out_), " is being written by another export, ", h->describe(),
                        "; wait for it to end"));
    } else if (!process_alive(t->pid)) {
      dead.push_back(p);
    }
  }
  uintmax_t removed = 0;
  // A marker-less folder only when empty: nothing of anyone's is lost.
  for (const fs::path& p : dead) removed += has(p / kExportMarker) ? remove_dead_export(p) : fs::remove(p, ec);
  if (removed > 0)
    log << "export: removed " << removed << " temporar" << (removed == 1 ? "y" : "ies")
        << " of interrupted exports in " << out_.parent_path().string() << "\n";
}

OutputDir::~OutputDir() {
  if (done_) return;
  lock_.reset();
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

void OutputDir::commit() {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(out_, ec);
  if (fs::exists(st) && !overwrite_)
    throw Error(cat(out_.string(), " appeared while exporting; not replaced"));
  if (file_)
    commit_file();
  else
    commit_folder();
  done_ = true;
  lock_.reset();
  fs::remove_all(tmp_, ec);  // the replaced export, or a file --out's emptied temporary
}

void OutputDir::commit_file() {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out_, ec)) && !file_->replaceable(out_))
    throw Error(cat(out_.string(), " appeared while exporting and is not ", file_->kind, "; not replaced"));
  if (::rename(file_path().c_str(), out_.c_str()) != 0)
    throw Error(cat(out_.string(), ": cannot move the export into place (", std::strerror(errno), ")"));
}

void OutputDir::commit_folder() {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(out_, ec))) {
    if (::rename(tmp_.c_str(), out_.c_str()) != 0)
      throw Error(cat(out_.string(), ": cannot move the export into place (", std::strerror(errno), ")"));
    lock_->moved_to(out_);
    return;
  }
  if (!has(out_ / kExportMarker))
    throw Error(cat(out_.string(), " appeared while exporting and is not a loft export; not replaced"));
  FolderLock old(out_, "export", what(out_));  // no other export is replacing it meanwhile
  if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, out_.c_str(), RENAME_EXCHANGE) == 0) {
    lock_->moved_to(out_);  // and the old export is at tmp_, removed by commit()
    return;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
    throw Error(cat(out_.string(), ": cannot move the export into place (", std::strerror(errno), ")"));
  // No exchange on this file system: the old export steps aside under a name the next export
  // recognises, the new one moves in.
  const fs::path aside = temporary_path(out_, kTemporaryTags[1]);
  fs::remove_all(aside, ec);
  if (::rename(out_.c_str(), aside.c_str()) != 0)
    throw Error(cat(out_.string(), ": cannot move the old export aside (", std::strerror(errno), ")"));
  if (::rename(tmp_.c_str(), out_.c_str()) != 0) {
    const int err = errno;
    ::rename(aside.c_str(), out_.c_str());
    throw Error(cat(out_.string(), ": cannot move the export into place (", std::strerror(err), ")"));
  }
  lock_->moved_to(out_);
  fs::rename(aside, tmp_, ec);  // so commit() removes it
  if (ec) fs::remove_all(aside, ec);
}

}  // namespace loft::exporter
