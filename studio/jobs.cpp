#include "studio/jobs.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/core/error.h"
#include "engine/io/atomic_file.h"
#include "studio/child_process.h"
#include "studio/run_folders.h"

namespace loft::studio {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxOut = size_t(16) << 20;   // a job's stdout kept whole (chat text, JSON results)
constexpr size_t kTailBytes = size_t(64) << 10;  // the log tail kept per job

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Only ever a started child: kill(-1, ...) would signal every process of the user.
void signal_child(const ChildProcess& c, int sig) {
  if (c.pid > 0) kill(c.pid, sig);
}

}  // namespace

const char* status_name(JobStatus s) {
  switch (s) {
    case JobStatus::queued: return "queued";
    case JobStatus::running: return "running";
    case JobStatus::stopping: return "stopping";
    case JobStatus::finished: return "finished";
    case JobStatus::failed: return "failed";
    case JobStatus::stopped: return "stopped";
  }
  return "unknown";
}

struct JobManager::Job {
  JobView view;
  ChildProcess child;
  bool out_open = false, err_open = false;
  std::string pending[2];   // a line not yet ended, per stream
  std::string last_err;     // the last non-empty stderr line
  std::ofstream log;
};

JobManager::JobManager(std::string loft_binary) : binary_(std::move(loft_binary)) {
  if (pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) throw Error("cannot create the job scheduler's pipe");
  thread_ = std::thread([this] { loop(); });
}

JobManager::~JobManager() {
  shutdown(0);
  close(wake_pipe_[0]);
  close(wake_pipe_[1]);
}

void JobManager::wake() {
  const char c = 1;
  ssize_t ignored = write(wake_pipe_[1], &c, 1);  // a full pipe already holds a wake-up
  (void)ignored;
}

void JobManager::changed() {
  ++changes_;
  change_cv_.notify_all();
}

std::string JobManager::submit(JobSpec spec) {
  std::lock_guard lock(mutex_);
  if (shutting_down_) throw Error("the studio is shutting down");
  auto job = std::make_unique<Job>();
  job->view.id = "j" + std::to_string(next_id_++);
  job->view.spec = std::move(spec);
  job->view.queued_at = now_s();
  const std::string id = job->view.id;
  jobs_.push_back(std::move(job));
  changed();
  wake();
  return id;
}

bool JobManager::stop(const std::string& id) {
  std::lock_guard lock(mutex_);
  for (auto& j : jobs_) {
    if (j->view.id != id) continue;
    JobView& v = j->view;
    if (v.status == JobStatus::queued) {
      v.status = JobStatus::stopped;
      v.ended_at = now_s();
    } else if (v.status == JobStatus::running || v.status == JobStatus::stopping) {
      // A second stop is a second signal: finetune then exits at once, without its checkpoint.
      signal_child(j->child, SIGTERM);
      v.stop_requested = true;
      v.status = JobStatus::stopping;
    } else {
      return false;
    }
    changed();
    return true;
  }
  return false;
}

std::optional<JobView> JobManager::get(const std::string& id) const {
  std::lock_guard lock(mutex_);
  for (const auto& j : jobs_)
    if (j->view.id == id) return j->view;
  return std::nullopt;
}

std::vector<JobView> JobManager::list() const {
  std::lock_guard lock(mutex_);
  std::vector<JobView> out;
  for (const auto& j : jobs_) out.push_back(j->view);
  return out;
}

std::optional<JobView> JobManager::latest_for_run(const fs::path& run_dir) const {
  std::lock_guard lock(mutex_);
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it)
    if ((*it)->view.spec.run_dir == run_dir) return (*it)->view;
  return std::nullopt;
}

uint64_t JobManager::wait_change(uint64_t seen, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  change_cv_.wait_for(lock, timeout, [&] { return changes_ != seen; });
  return changes_;
}

void JobManager::start_ready() {
  std::set<std::string> busy, wanted;
  for (const auto& j : jobs_)
    if (j->view.status == JobStatus::running || j->view.status == JobStatus::stopping)
      busy.insert(j->view.spec.devices.begin(), j->view.spec.devices.end());
  for (auto& j : jobs_) {
    JobView& v = j->view;
    if (v.status != JobStatus::queued) continue;
    const bool free = std::none_of(v.spec.devices.begin(), v.spec.devices.end(),
                                   [&](const std::string& d) { return busy.count(d) || wanted.count(d); });
    if (!free) {  // first come, first served on each device
      wanted.insert(v.spec.devices.begin(), v.spec.devices.end());
      continue;
    }
    std::vector<std::string> argv{binary_};
    argv.insert(argv.end(), v.spec.args.begin(), v.spec.args.end());
    v.started_at = now_s();
    try {
      j->child = spawn_child(argv);
    } catch (const std::exception& e) {
      v.status = JobStatus::failed;
      v.error = e.what();
      v.ended_at = now_s();
      continue;
    }
    j->out_open = j->err_open = true;
    v.status = JobStatus::running;
    if (!v.spec.log_file.empty()) j->log.open(v.spec.log_file, std::ios::app | std::ios::binary);
    busy.insert(v.spec.devices.begin(), v.spec.devices.end());
    changed();
  }
}

void JobManager::read_output(Job& job, int fd, bool is_err) {
  char buf[65536];
  const ssize_t n = read(fd, buf, sizeof buf);
  std::lock_guard lock(mutex_);
  if (n <= 0) {
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    close(fd);
    (is_err ? job.err_open : job.out_open) = false;
    return;
  }
  const std::string_view chunk(buf, size_t(n));
  JobView& v = job.view;
  if (!is_err && v.out.size() < kMaxOut) v.out.append(chunk.substr(0, kMaxOut - v.out.size()));
  v.log_tail.append(chunk);
  if (v.log_tail.size() > kTailBytes) v.log_tail.erase(0, v.log_tail.size() - kTailBytes);
  if (job.log.is_open()) job.log.write(buf, n).flush();
  // Lines end at \n, and progress bars redraw theirs after \r.
  std::string& pending = job.pending[is_err];
  for (char c : chunk) {
    if (c != '\n' && c != '\r') {
      if (pending.size() < 4096) pending += c;
      continue;
    }
    if (!pending.empty()) {
      v.progress = pending;
      if (is_err) job.last_err = pending;
    }
    pending.clear();
  }
  changed();
}

void JobManager::finish(Job& job, int status) {
  JobView& v = job.view;
  for (int s = 0; s < 2; ++s)
    if (!job.pending[s].empty()) {
      v.progress = job.pending[s];
      if (s == 1) job.last_err = job.pending[s];
    }
  v.exit_status = status;
  v.ended_at = now_s();
  const bool stop_exit = (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) ||
                         (WIFSIGNALED(status) && (WTERMSIG(status) == SIGTERM || WTERMSIG(status) == SIGKILL));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    v.status = JobStatus::finished;
  } else if (v.stop_requested && stop_exit) {
    v.status = JobStatus::stopped;
  } else {
    v.status = JobStatus::failed;
    const std::string why = last_error_line(job.last_err);
    v.error = describe_exit(status) + (why.empty() ? "" : ": " + why);
  }
  if (job.log.is_open()) {
    job.log << "[loft studio] " << v.spec.kind << " job " << v.id << ": " << status_name(v.status) << ", "
            << describe_exit(status) << "\n";
    job.log.close();
  }
  if (!v.spec.run_dir.empty()) {
    try {
      save_run_outcome(v.spec.run_dir, {status_name(v.status), v.error, v.ended_at});
    } catch (const std::exception&) {  // the run folder went away: the studio still knows
    }
  }
  changed();
}

void JobManager::reap() {
  for (auto& j : jobs_) {
    if ((j->view.status != JobStatus::running && j->view.status != JobStatus::stopping) || j->out_open || j->err_open)
      continue;
    int status = 0;
    const pid_t r = waitpid(j->child.pid, &status, WNOHANG);
    if (r == j->child.pid) finish(*j, status);
  }
}

void JobManager::loop() {
  for (;;) {
    std::vector<pollfd> fds{{wake_pipe_[0], POLLIN, 0}};
    std::vector<std::pair<Job*, bool>> owners{{nullptr, false}};
    {
      std::lock_guard lock(mutex_);
      reap();
      if (!shutting_down_) start_ready();
      bool running = false;
      for (auto& j : jobs_) {
        if (j->view.status != JobStatus::running && j->view.status != JobStatus::stopping) continue;
        running = true;
        if (j->out_open) fds.push_back({j->child.out_fd, POLLIN, 0}), owners.push_back({j.get(), false});
        if (j->err_open) fds.push_back({j->child.err_fd, POLLIN, 0}), owners.push_back({j.get(), true});
      }
      if (quit_ && !running) return;
    }
    if (poll(fds.data(), fds.size(), 200) <= 0) continue;
    if (fds[0].revents) {
      char drain[256];
      while (read(wake_pipe_[0], drain, sizeof drain) > 0) {
      }
    }
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_output(*owners[i].first, fds[i].fd, owners[i].second);
  }
}

void JobManager::kill_all() {
  std::lock_guard lock(mutex_);
  for (auto& j : jobs_)
    if (j->view.status == JobStatus::running || j->view.status == JobStatus::stopping) signal_child(j->child, SIGKILL);
}

void JobManager::shutdown(double grace_s) {
  {
    std::unique_lock lock(mutex_);
    if (quit_) return;
    shutting_down_ = true;
    for (auto& j : jobs_) {
      JobView& v = j->view;
      if (v.status == JobStatus::queued) {
        v.status = JobStatus::stopped;
        v.ended_at = now_s();
      } else if (v.status == JobStatus::running) {
        signal_child(j->child, SIGTERM);
        v.stop_requested = true;
        v.status = JobStatus::stopping;
      }
    }
    changed();
    auto running = [&] {
      return std::any_of(jobs_.begin(), jobs_.end(), [](const auto& j) { return j->view.live(); });
    };
    change_cv_.wait_for(lock, std::chrono::duration<double>(grace_s), [&] { return !running(); });
    for (auto& j : jobs_)
      if (j->view.live()) signal_child(j->child, SIGKILL);
    change_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !running(); });
    quit_ = true;
  }
  wake();
  if (thread_.joinable()) thread_.join();
}

}  // namespace loft::studio
