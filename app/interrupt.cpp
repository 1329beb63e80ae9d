#include "app/interrupt.h"

#include <signal.h>
#include <unistd.h>

namespace loft::app {

namespace {

std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");
struct sigaction g_old_int, g_old_term;

void on_signal(int sig) {
  if (g_signal.exchange(sig) != 0) _exit(128 + sig);  // the second one: no checkpoint, now
  static constexpr char kMsg[] =
      "\nloft: stopping after this step: writing a checkpoint (signal again to exit at once)\n";
  ssize_t ignored = write(2, kMsg, sizeof kMsg - 1);
  (void)ignored;
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
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

const std::atomic<int>& StopSignals::flag() const { return g_signal; }

}  // namespace loft::app
