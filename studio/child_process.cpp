#include "studio/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "engine/core/error.h"

namespace loft::studio {

namespace {

// In the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_child(const std::vector<char*>& args, int out, int err, pid_t parent) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) signal(sig, SIG_DFL);
  // Ignored, so a job whose studio died (its pipes without a reader) still checkpoints and exits
  // on the SIGHUP below instead of dying at its next line of output.
  signal(SIGPIPE, SIG_IGN);
  setpgid(0, 0);
  // SIGHUP, not SIGTERM: the kernel sends it again each time the child passes to another thread of
  // the dying studio, and finetune stops on SIGHUP without escalating (app/interrupt.h).
  prctl(PR_SET_PDEATHSIG, SIGHUP);
  if (getppid() != parent) _exit(127);  // the studio died before prctl took effect
  const int null = open("/dev/null", O_RDONLY);
  if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(127);
  // Nothing else of the studio's (its listening socket, clients, other jobs' pipes) goes along.
  if (close_range(3, ~0U, 0) != 0)
    for (int fd = 3; fd < 65536; ++fd) close(fd);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execv(args[0], args.data());
  static constexpr char kMsg[] = "loft studio: cannot execute the loft binary\n";
  ssize_t ignored = write(2, kMsg, sizeof kMsg - 1);
  (void)ignored;
  _exit(127);
}

}  // namespace

ChildProcess spawn_child(const std::vector<std::string>& argv) {
  LOFT_CHECK(!argv.empty() && argv[0].starts_with("/"), "spawn_child needs an absolute binary path");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw Error(cat("cannot create a pipe: ", std::strerror(errno)));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]), close(out[1]);
    throw Error(cat("cannot create a pipe: ", std::strerror(errno)));
  }
  // Signals stay blocked across the fork so no handler of the studio runs in the child.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) exec_child(args, out[1], err[1], parent);
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(out[0]), close(err[0]);
    throw Error(cat("cannot start ", argv[0], ": ", std::strerror(fork_errno)));
  }
  return {pid, out[0], err[0]};
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return cat("exit code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return cat("killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  return cat("wait status ", status);
}

std::string last_error_line(const std::string& err) {
  std::string line, error;
  for (size_t at = 0; at < err.size();) {
    const size_t end = std::min(err.find_first_of("\r\n", at), err.size());
    if (end > at) line = err.substr(at, end - at);
    if (line.starts_with("loft: error: ")) error = line;  // not the usage hint printed after it
    at = end + 1;
  }
  if (!error.empty()) line = error;
  for (const std::string prefix : {"loft: error: ", "loft: "})
    if (line.starts_with(prefix)) return line.substr(prefix.size());
  return line;
}

CapturedRun run_captured(const std::vector<std::string>& argv, double timeout_s, size_t max_bytes) {
  const ChildProcess c = spawn_child(argv);
  CapturedRun r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  pollfd fds[2] = {{c.out_fd, POLLIN, 0}, {c.err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  bool timed_out = false;
  char buf[65536];
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      kill(c.pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, int(std::min<int64_t>(left.count(), 1000))) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
      } else if (sinks[i]->size() < max_bytes) {
        sinks[i]->append(buf, std::min(size_t(n), max_bytes - sinks[i]->size()));
      }
    }
  }
  for (const pollfd& f : fds)
    if (f.fd >= 0) close(f.fd);
  while (waitpid(c.pid, &r.status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) throw Error(cat("loft ", argv.size() > 1 ? argv[1] : "", " took longer than ", timeout_s, " s"));
  return r;
}

}  // namespace loft::studio
