#include "engine/device/memory_limit.h"

#include <atomic>

#include "engine/core/error.h"
#ifdef LOFT_WITH_CUDA
#include "engine/device/cuda_memory.h"
#endif

namespace loft {

namespace {
std::atomic<int64_t> g_limit{0};
}

void set_gpu_memory_limit(int64_t bytes) {
  LOFT_CHECK(bytes >= 0, "GPU memory limit ", bytes, " is negative");
  g_limit.store(bytes, std::memory_order_relaxed);
}

int64_t gpu_memory_limit() { return g_limit.load(std::memory_order_relaxed); }

OutsideMemory memory_outside(Device device) {
#ifdef LOFT_WITH_CUDA
  if (device.is_cuda()) return cuda::outside(device.index);
#endif
  (void)device;
  return {};
}

}  // namespace loft
