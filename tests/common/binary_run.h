// Runs the real loft binary (LOFT_BINARY) as a child process with a time limit, so a test sees
// exactly what a user sees: the exit code, stdout, stderr, and whether it hung or crashed.
#pragma once
#include <chrono>
#include <string>
#include <vector>

namespace loft::test {

struct BinaryResult {
  int code = -1;          // the exit status; -1 when it did not exit normally
  int signal = 0;         // the signal that ended it (SIGSEGV, or SIGKILL after a timeout)
  bool timed_out = false;
  std::string out, err;
};

// Starts the binary with `args` (without the program name), stdin empty, stdout and stderr to
// the files named (they may be "/dev/null"); the child's pid, or -1 when it cannot start.
int spawn_loft(const std::vector<std::string>& args, const std::string& out, const std::string& err);

// `args` without the program name. The child is killed (SIGKILL) after `timeout`.
BinaryResult run_loft(const std::vector<std::string>& args,
                      std::chrono::seconds timeout = std::chrono::seconds(120));

}  // namespace loft::test
