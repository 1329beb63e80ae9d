// Points in the work queued on a device's compute stream, and the time between two of them once
// the stream has passed both: CUDA events on a GPU, the host clock on the CPU (where ops run as
// they are called). For timings the one-per-process profiler (profile.h) cannot take: each rank
// of a data-parallel bench keeps its own (engine/train/bench_parallel.cpp).
#pragma once
#include <chrono>
#include <cstddef>
#include <vector>

#include "engine/tensor/device.h"

namespace loft {

class StreamClock {
 public:
  StreamClock(Device device, size_t points);
  ~StreamClock();
  StreamClock(const StreamClock&) = delete;
  StreamClock& operator=(const StreamClock&) = delete;

  // Point i is reached when the stream has run everything queued so far (the current thread's
  // device must be `device`).
  void mark(size_t i);
  // Seconds from point `from` to point `to` (both marked, the stream synchronised since).
  double seconds(size_t from, size_t to) const;

 private:
  Device device_;
  std::vector<void*> events_;  // cudaEvent_t, on a GPU
  std::vector<std::chrono::steady_clock::time_point> host_;
};

}  // namespace loft
