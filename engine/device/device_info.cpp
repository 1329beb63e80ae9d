#include "engine/device/device_info.h"

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

}  // namespace loft
