#include "engine/device/device_info.h"

#include <unistd.h>

#ifdef LOFT_WITH_CUDA
#include "engine/device/cuda_context.h"
#endif
#include "engine/core/error.h"

namespace loft {

DeviceInfo device_info(Device device) {
  if (device.is_cpu()) return {"cpu", 0, 0};
#ifdef LOFT_WITH_CUDA
  cudaDeviceProp prop{};
  LOFT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device.index));
  int current = 0;
  LOFT_CUDA_CHECK(cudaGetDevice(&current));
  LOFT_CUDA_CHECK(cudaSetDevice(device.index));  // cudaMemGetInfo reports the current device
  size_t free = 0, total = 0;
  const cudaError_t err = cudaMemGetInfo(&free, &total);
  LOFT_CUDA_CHECK(cudaSetDevice(current));
  LOFT_CUDA_CHECK(err);
  return {prop.name, int64_t(total), int64_t(free)};
#else
  throw Error(cat("device ", device.str(), ": this loft was built without the CUDA backend"));
#endif
}

int64_t device_memory_bytes(Device device) {
  if (!device.is_cpu()) {
    const int64_t total = device_info(device).total_bytes;
    if (total > 0) return total;
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * int64_t(page) : 0;
}

}  // namespace loft
