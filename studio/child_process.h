// Child processes of the studio: the loft binary with an argument vector (fork + execv, never a
// shell), stdout and stderr on pipes, stdin from /dev/null, in its own process group (a Ctrl-C
// meant for the studio reaches a job only through the studio, once) and with PR_SET_PDEATHSIG,
// so a studio that dies (even kill -9) sends its jobs SIGHUP and training jobs checkpoint.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace loft::studio {

struct ChildProcess {
  pid_t pid = -1;
  int out_fd = -1;  // the child's stdout (read end)
  int err_fd = -1;  // the child's stderr (read end)
};

// Starts argv[0] (an absolute path) with argv. Error when the pipes or the fork fail; a binary
// that cannot be executed exits 127 with a line on its stderr. PR_SET_PDEATHSIG follows the
// thread that calls this: call it from a thread that lives as long as the child should.
ChildProcess spawn_child(const std::vector<std::string>& argv);

// "exit code 1", "killed by signal 9 (Killed)" for a waitpid status.
std::string describe_exit(int status);

// The one-line message of a failed loft command: its last non-empty stderr line (progress bars
// redraw after \r), without "loft: error: ".
std::string last_error_line(const std::string& err);

struct CapturedRun {
  int status = 0;  // waitpid's
  std::string out, err;
};
// Runs argv to completion, collecting at most `max_bytes` of each stream (the rest is read and
// dropped); kills it (SIGKILL) after `timeout_s` seconds, which is an Error naming argv[1].
CapturedRun run_captured(const std::vector<std::string>& argv, double timeout_s, size_t max_bytes);

}  // namespace loft::studio
