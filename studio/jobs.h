// The studio's jobs: training runs, evaluations, exports and chats, each a child process of the
// loft binary (studio/child_process.h) started by one scheduler thread. A job occupies the
// devices it computes on ("cpu", "cuda:0", ...); a queued job starts once none of its devices is
// busy and no job queued before it wants one of them. The server never waits on a job: routes
// read snapshots. A job that crashes or is killed is recorded with its exit code or signal and
// its last stderr line; the studio goes on.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace loft::studio {

enum class JobStatus { queued, running, stopping, finished, failed, stopped };
const char* status_name(JobStatus s);

struct JobSpec {
  std::string kind;                   // "run", "evaluate", "export", "chat"
  std::vector<std::string> args;      // after the binary: {"finetune", "--config", FILE}
  std::vector<std::string> devices;   // what it computes on
  std::filesystem::path log_file;     // its output is appended here too (runs: RUN/studio.log)
  std::filesystem::path run_dir;      // a training run's folder
  nlohmann::json info;                // what routes note about it (an export's output path)
};

// A job as routes see it (a copy taken under the manager's lock).
struct JobView {
  std::string id;
  JobSpec spec;
  JobStatus status = JobStatus::queued;
  std::string progress;   // the last non-empty line of its output
  std::string error;      // why it failed: exit code or signal, and its last stderr line
  std::string log_tail;   // the last 64 KiB of its stdout and stderr
  std::string out;        // its whole stdout (at most 16 MiB)
  int exit_status = -1;   // waitpid's; -1 while it runs
  bool stop_requested = false;
  double queued_at = 0, started_at = 0, ended_at = 0;  // seconds since the epoch
  bool live() const { return status == JobStatus::queued || status == JobStatus::running || status == JobStatus::stopping; }
};

class JobManager {
 public:
  explicit JobManager(std::string loft_binary);
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Queues a job and returns its id ("j1", "j2", ...).
  std::string submit(JobSpec spec);
  // A queued job is dropped (stopped); a running one gets SIGTERM (a training run checkpoints and
  // exits; a second stop makes it exit at once). False when there is no such job or it has ended.
  bool stop(const std::string& id);
  std::optional<JobView> get(const std::string& id) const;
  std::vector<JobView> list() const;
  // The newest job of a run folder, if the studio started one.
  std::optional<JobView> latest_for_run(const std::filesystem::path& run_dir) const;

  // Every change (output, status) bumps a counter: waits until it passes `seen` or `timeout` ends,
  // and returns the counter.
  uint64_t wait_change(uint64_t seen, std::chrono::milliseconds timeout) const;

  // Drops the queue, asks running jobs to stop, waits up to `grace_s` seconds for them, kills the
  // rest, and ends the scheduler. Later submissions are refused.
  void shutdown(double grace_s);
  // SIGKILL to every running job (a second Ctrl-C of the studio).
  void kill_all();

 private:
  struct Job;
  void loop();
  void start_ready();     // under mutex_
  void reap();            // under mutex_
  void read_output(Job& job, int fd, bool is_err);
  void finish(Job& job, int status);
  void wake();
  void changed();         // under mutex_

  std::string binary_;
  mutable std::mutex mutex_;
  mutable std::condition_variable change_cv_;
  uint64_t changes_ = 0;
  int64_t next_id_ = 1;
  std::list<std::unique_ptr<Job>> jobs_;  // in submission order
  bool shutting_down_ = false, quit_ = false;
  int wake_pipe_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace loft::studio
