// A folder loft writes (a finetune run folder, an export being written) belongs to one process at a
// time: that process holds flock(LOCK_EX) on DIR/.loft.lock for as long as it writes there. The
// file holds one line of JSON, {"pid":123,"started":"2026-11-27T18:53:18Z","command":"finetune"},
// so whoever is refused can say who holds the folder. The kernel drops a flock when its process
// dies, so a lock file left by a killed process is simply taken over. Others test liveness with a
// separate open (without creating the file) + flock(LOCK_EX|LOCK_NB): folder_lock_holder() below.
// docs/reliability.md ("Paths and locks") states the contract.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace loft {

inline constexpr const char* kFolderLockFile = ".loft.lock";

struct LockHolder {
  int64_t pid = 0;
  std::string started;  // ISO-8601 UTC, seconds: "2026-11-27T18:53:18Z"
  std::string command;  // "finetune", "export", a studio job's name
  // "pid 123 (finetune, started 2026-11-27T18:53:18Z)"
  std::string describe() const;
};

class FolderLock {
 public:
  // Takes DIR/.loft.lock (DIR must exist) for `command`. `what` names the folder in messages
  // ("--out runs/a"). Throws Error naming the holder's pid and start time when another process
  // (or another FolderLock of this one) holds it, or naming the file when it cannot be created.
  FolderLock(const std::filesystem::path& dir, const std::string& command, const std::string& what);
  // Removes the lock file (when it is still this lock's) and releases the lock.
  ~FolderLock();
  FolderLock(FolderLock&& other) noexcept;
  FolderLock& operator=(FolderLock&&) = delete;
  FolderLock(const FolderLock&) = delete;

  // The folder was renamed to `dir` (an export's temporary moved into place): the lock file went
  // with it, still held.
  void moved_to(const std::filesystem::path& dir);
  const LockHolder& holder() const { return self_; }

 private:
  std::filesystem::path file_;
  int fd_ = -1;
  LockHolder self_;
};

// Who holds DIR/.loft.lock now, or nothing when no live process does (no file, or one a dead
// process left). Never blocks, never creates the file.
std::optional<LockHolder> folder_lock_holder(const std::filesystem::path& dir);

// Now as ISO-8601 UTC to the second ("2026-11-27T18:53:18Z").
std::string utc_now_iso8601();

}  // namespace loft
