#include "engine/device/stream_clock.h"

#include "engine/core/error.h"
#ifdef LOFT_WITH_CUDA
#include "engine/device/cuda_context.h"
#endif

namespace loft {

StreamClock::StreamClock(Device device, size_t points) : device_(device), host_(points) {
#ifdef LOFT_WITH_CUDA
  if (device_.is_cuda()) {
    for (size_t i = 0; i < points; ++i) {
      cudaEvent_t e;
      LOFT_CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
  }
#endif
}

StreamClock::~StreamClock() {
#ifdef LOFT_WITH_CUDA
  for (void* e : events_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
#endif
}

void StreamClock::mark(size_t i) {
  LOFT_CHECK(i < host_.size(), "StreamClock: point ", i, " of ", host_.size());
#ifdef LOFT_WITH_CUDA
  if (device_.is_cuda()) {
    LOFT_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(events_[i]), cuda::stream(device_.index)));
    return;
  }
#endif
  host_[i] = std::chrono::steady_clock::now();
}

double StreamClock::seconds(size_t from, size_t to) const {
  LOFT_CHECK(from < host_.size() && to < host_.size(), "StreamClock: points ", from, " and ", to,
             " of ", host_.size());
#ifdef LOFT_WITH_CUDA
  if (device_.is_cuda()) {
    float ms = 0;
    LOFT_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(events_[from]),
                                         static_cast<cudaEvent_t>(events_[to])));
    return double(ms) * 1e-3;
  }
#endif
  return std::chrono::duration<double>(host_[to] - host_[from]).count();
}

}  // namespace loft
