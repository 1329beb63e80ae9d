#include "app/interrupt.h"

#include <signal.h>
#include <unistd.h>

namespace loft::app {

namespace {

std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");
struct sigaction g_old_int, g_old_term, g_old_hup;

void on_signal(int sig) {
  static constexpr char kMsg[] =
      "\nloft: stopping after this step: writing a checkpoint (signal again to exit at once)\n";
  int none = 0;
  if (g_signal.compare_exchange_strong(none, sig)) {
    ssize_t ignored = write(2, kMsg, sizeof kMsg - 1);
    (void)ignored;
  } else if (sig != SIGHUP) {
    _exit(128 + sig);  // a second Ctrl-C/SIGTERM: no checkpoint, now
  }
}

}  // namespace

StopSignals::StopSignals() {
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
  // SIGHUP (the terminal closed, or the studio that started this run died: its jobs get SIGHUP
  // through PR_SET_PDEATHSIG, once per thread of the studio that exits) stops the run as well but
  // never escalates; a run started under nohup keeps ignoring it.
  sigaction(SIGHUP, nullptr, &g_old_hup);
  if (g_old_hup.sa_handler != SIG_IGN) sigaction(SIGHUP, &sa, nullptr);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGHUP, &g_old_hup, nullptr);
}

const std::atomic<int>& StopSignals::flag() const { return g_signal; }

}  // namespace loft::app
