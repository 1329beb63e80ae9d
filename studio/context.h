// What every route of one studio shares: its options, secrets, path rules, jobs and the server.
#pragma once
#include <httplib.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "studio/jobs.h"
#include "studio/options.h"
#include "studio/paths.h"

namespace loft::studio {

struct StudioContext {
  StudioContext(StudioOptions o, PathPolicy p) : options(std::move(o)), paths(std::move(p)) {}

  StudioOptions options;
  PathPolicy paths;
  std::string token;                // every request but /api/health and / carries it
  std::string csrf;                 // X-CSRF-Token of state-changing requests
  std::vector<std::string> hosts;   // accepted Host header values
  std::string loft_binary;          // what jobs run
  int port = 0;
  std::unique_ptr<JobManager> jobs;
  std::mutex runs_mutex;            // one run start or resume at a time (checks, then submit)
  httplib::Server http;
  std::atomic<bool> stopping{false};  // event streams end when set
  std::atomic<int> streams{0};        // event streams open now (bounded: kMaxStreams)
  std::thread thread;                 // Studio::start()'s
};

// Event streams hold a connection each: at most this many at once, so API calls always find a thread.
inline constexpr int kMaxStreams = 12;

}  // namespace loft::studio
