// Ctrl-C (SIGINT) and SIGTERM during `loft finetune`: the first asks the trainer to stop after the
// step it is taking, write a checkpoint and the adapter so far, and exit with "stopped at step N;
// continue with --resume" (exit status 128 + the signal, as a shell reports a signal); a second
// signal exits at once. SIGHUP stops the same way but never escalates (see interrupt.cpp). The
// studio stops its training jobs with SIGTERM.
#pragma once
#include <atomic>

#include "engine/core/error.h"

namespace loft::app {

// Installs the handlers for its lifetime (restoring the previous ones after) and clears the flag.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The signal received (0: none yet); the trainer reads it between steps.
  const std::atomic<int>& flag() const;
};

// Thrown when a run stopped on a signal: run_cli prints the message and exits 128 + signal.
class Interrupted : public Error {
 public:
  Interrupted(const std::string& message, int signal) : Error(message), signal_(signal) {}
  int exit_code() const { return 128 + signal_; }

 private:
  int signal_;
};

}  // namespace loft::app
