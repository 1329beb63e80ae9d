#include "studio/run_studio.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <thread>

#include "engine/core/error.h"
#include "studio/child_process.h"
#include "studio/context.h"
#include "studio/jobs.h"
#include "studio/security.h"
#include "studio/server.h"

namespace loft::studio {

namespace {

// xdg-open in the background; its failure only costs the convenience.
void open_browser(const std::string& url) {
  for (const char* dir : {"/usr/bin/xdg-open", "/usr/local/bin/xdg-open"})
    if (access(dir, X_OK) == 0) {
      std::thread([argv = std::vector<std::string>{dir, url}] {
        try {
          run_captured(argv, 30, 4096);
        } catch (const std::exception&) {
        }
      }).detach();
      return;
    }
  std::cerr << "--open: no xdg-open on this machine; open the URL yourself\n";
}

// Ctrl-C and SIGTERM reach whichever thread the kernel picks (libraries start threads of their
// own), so the handler only writes the signal to a pipe that one thread of run_studio reads.
int g_signal_pipe[2] = {-1, -1};

void on_stop_signal(int sig) {
  const unsigned char s = static_cast<unsigned char>(sig);
  ssize_t ignored = write(g_signal_pipe[1], &s, 1);
  (void)ignored;
}

}  // namespace

void run_studio(const StudioOptions& options) {
  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) throw Error("cannot create the studio's signal pipe");
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  Studio studio(options);
  if (!is_loopback_host(options.host))
    std::cout << "loft studio: listening on " << options.host << ", reachable from other machines; "
              << "anyone with the URL below can train and read files under the roots\n";
  std::cout << "loft studio " << LOFT_VERSION << ": open " << studio.url() << "\n"
            << "  roots: ";
  for (const auto& r : studio.context().paths.roots()) std::cout << r.string() << "  ";
  std::cout << "\n  runs:  " << studio.context().paths.runs().string() << "\n"
            << "Ctrl-C stops the studio (running trainings checkpoint first)\n"
            << std::flush;
  if (options.open) open_browser(studio.url());

  // The first signal stops serving (below, jobs then checkpoint); a second kills the jobs.
  std::atomic<bool> done{false};
  std::thread signals([&] {
    for (int count = 0; !done;) {
      pollfd p{g_signal_pipe[0], POLLIN, 0};
      unsigned char sig = 0;
      if (poll(&p, 1, 200) <= 0 || read(g_signal_pipe[0], &sig, 1) != 1) continue;
      if (++count == 1) {
        std::cout << "\nloft studio: stopping; running jobs checkpoint and exit (signal again to kill them)\n"
                  << std::flush;
        studio.interrupt();
      } else {
        studio.context().jobs->kill_all();
      }
    }
  });
  studio.serve();
  studio.stop(/*job_grace_s=*/600);
  done = true;
  signals.join();
}

}  // namespace loft::studio
