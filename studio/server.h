// The studio's HTTP server: cpp-httplib bound to --host:--port, every request checked
// (studio/security.h) before its route runs, JSON errors, bounded bodies, headers and connections.
// The routes live in studio/routes_*.cpp; jobs (training, evaluation, export, chat) are child
// processes of the loft binary run by studio/jobs.h.
#pragma once
#include <memory>
#include <string>

#include "studio/options.h"

namespace loft::studio {

struct StudioContext;

class Studio {
 public:
  // Checks the options (UsageError naming the option) and binds the port (Error when taken).
  explicit Studio(StudioOptions options);
  ~Studio();
  Studio(const Studio&) = delete;
  Studio& operator=(const Studio&) = delete;

  // Serves until stop() (blocking), or in a background thread (tests).
  void serve();
  void start();
  // Stops serving (serve() returns once open requests end; event streams end at once); jobs go on.
  void interrupt();
  // interrupt(), then asks running jobs to checkpoint and waits for them (at most `job_grace_s`
  // seconds, then kills them).
  void stop(double job_grace_s = 60);

  int port() const;
  // The address to open: http://HOST:PORT/?token=TOKEN.
  std::string url() const;
  const std::string& token() const;
  StudioContext& context();

 private:
  std::unique_ptr<StudioContext> ctx_;
  bool stopped_ = false;
};

}  // namespace loft::studio
