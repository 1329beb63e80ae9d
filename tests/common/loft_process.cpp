#include "tests/common/loft_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <thread>

#include "tests/common/binary_run.h"
#include "tests/common/test_util.h"

namespace loft::test {

namespace fs = std::filesystem;

LoftProcess::LoftProcess(const std::vector<std::string>& args, const fs::path& logs) : logs_(logs) {
  pid_ = spawn_loft(args, logs.empty() ? "/dev/null" : logs.string() + ".out",
                    logs.empty() ? "/dev/null" : logs.string() + ".err");
  if (pid_ < 0) ADD_FAILURE() << "cannot start " << test::loft_binary();
}

LoftProcess::~LoftProcess() {
  if (running()) kill();
}

bool LoftProcess::running() {
  if (pid_ < 0 || status_ >= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return true;
  status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return false;
}

int LoftProcess::wait(std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (running()) {
    ADD_FAILURE() << "loft (pid " << pid_ << ") still running after " << timeout.count() << " s: killed";
    kill();
  }
  return status_;
}

void LoftProcess::kill() {
  if (!running()) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  status_ = 128 + SIGKILL;
}

std::string LoftProcess::out() const { return logs_.empty() ? "" : read_text(logs_.string() + ".out"); }
std::string LoftProcess::err() const { return logs_.empty() ? "" : read_text(logs_.string() + ".err"); }

bool wait_for(LoftProcess& p, const std::function<bool()>& ready, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    if (!p.running()) return ready();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

pid_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

}  // namespace loft::test
