#include "engine/io/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <thread>

#include "engine/core/error.h"
#include "engine/io/json_read.h"

namespace loft {

namespace fs = std::filesystem;

namespace {

// A liveness probe holds the lock for an instant, and a new holder writes its line just after
// taking it: a refusal or an unreadable line is tried again for up to ~100 ms before it counts.
constexpr int kAttempts = 20;
constexpr auto kPause = std::chrono::milliseconds(5);

// The holder's line, or nothing while it is missing or half-written.
std::optional<LockHolder> read_holder(int fd) {
  char buf[4096];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  if (n <= 0) return std::nullopt;
  std::string error;
  const std::optional<nlohmann::json> j = try_parse_json(std::string_view(buf, size_t(n)), error);
  if (!j || !j->is_object()) return std::nullopt;
  const auto pid = j->find("pid"), started = j->find("started"), command = j->find("command");
  if (pid == j->end() || !pid->is_number_integer() || started == j->end() || !started->is_string() ||
      command == j->end() || !command->is_string())
    return std::nullopt;
  return LockHolder{pid->get<int64_t>(), started->get<std::string>(), command->get<std::string>()};
}

bool same_file(int fd, const fs::path& file) {
  struct stat a {}, b {};
  return ::fstat(fd, &a) == 0 && ::stat(file.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

}  // namespace

std::string LockHolder::describe() const {
  if (pid <= 0) return "another process";
  return cat("pid ", pid, " (", command, ", started ", started, ")");
}

std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

FolderLock::FolderLock(const fs::path& dir, const std::string& command, const std::string& what)
    : file_(dir / kFolderLockFile) {
  std::optional<LockHolder> other;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(kPause);
    const int fd = ::open(file_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(cat(what, ": cannot create ", file_.string(), " (", std::strerror(errno), ")"));
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      // The previous holder removes the file as it lets go: a lock taken on a removed file is no lock.
      if (same_file(fd, file_)) {
        fd_ = fd;
        break;
      }
      ::close(fd);
      continue;
    }
    const int err = errno;
    if (err != EWOULDBLOCK) {
      ::close(fd);
      throw Error(cat(what, ": cannot lock ", file_.string(), " (", std::strerror(err), ")"));
    }
    if (auto h = read_holder(fd)) other = h;
    ::close(fd);
  }
  if (fd_ < 0)
    throw Error(cat(what, " is in use by ", other ? other->describe() : "another process", " (it holds ",
                    file_.string(), "); wait for it to end or pick another folder"));
  self_ = {int64_t(::getpid()), utc_now_iso8601(), command};
  const std::string line = nlohmann::ordered_json{{"pid", self_.pid}, {"started", self_.started},
                                                  {"command", self_.command}}.dump() + "\n";
  // Written over the old line, then cut to length: a reader never sees an empty file.
  if (::pwrite(fd_, line.data(), line.size(), 0) != ssize_t(line.size()) || ::ftruncate(fd_, off_t(line.size())) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw Error(cat(what, ": cannot write ", file_.string(), " (", std::strerror(err), ")"));
  }
}

FolderLock::FolderLock(FolderLock&& other) noexcept
    : file_(std::move(other.file_)), fd_(other.fd_), self_(std::move(other.self_)) {
  other.fd_ = -1;
}

FolderLock::~FolderLock() {
  if (fd_ < 0) return;
  if (same_file(fd_, file_)) ::unlink(file_.c_str());
  ::close(fd_);
}

void FolderLock::moved_to(const fs::path& dir) { file_ = dir / kFolderLockFile; }

std::optional<LockHolder> folder_lock_holder(const fs::path& dir) {
  const fs::path file = dir / kFolderLockFile;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(kPause);
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      ::flock(fd, LOCK_UN);
      ::close(fd);
      return std::nullopt;
    }
    const bool held = errno == EWOULDBLOCK;
    const std::optional<LockHolder> h = held ? read_holder(fd) : std::nullopt;
    ::close(fd);
    if (!held) return std::nullopt;
    if (h) return h;
  }
  return LockHolder{};  // held, but its line never became readable
}

}  // namespace loft
