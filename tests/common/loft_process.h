// The real loft binary as a child process that a test watches and kills while it runs (two runs
// racing for one folder, an export killed while writing); tests/common/binary_run.h starts it.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace loft::test {

class LoftProcess {
 public:
  // Starts LOFT_BINARY with `args`; stdout and stderr go to `logs`.out / `logs`.err (or, with no
  // `logs`, to /dev/null).
  explicit LoftProcess(const std::vector<std::string>& args, const std::filesystem::path& logs = {});
  ~LoftProcess();  // a child still running is killed and reaped
  LoftProcess(const LoftProcess&) = delete;
  LoftProcess& operator=(const LoftProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Whether it is still running (reaps it when it has ended).
  bool running();
  // Its exit code once it ends (128 + the signal when a signal ended it); a child still running
  // after `timeout` is killed, and the test fails.
  int wait(std::chrono::seconds timeout = std::chrono::seconds(300));
  void kill();  // SIGKILL, reaped
  std::string out() const;
  std::string err() const;

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  std::filesystem::path logs_;
};

// Polls `ready` every millisecond until it holds (true), or `p` ends or `timeout` passes (false).
bool wait_for(LoftProcess& p, const std::function<bool()>& ready,
              std::chrono::seconds timeout = std::chrono::seconds(120));

// A pid that no process has: a forked child's, once it ended and was reaped.
pid_t dead_pid();

}  // namespace loft::test
