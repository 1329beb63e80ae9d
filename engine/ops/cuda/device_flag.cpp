#include "engine/ops/cuda/device_flag.h"

#include "engine/device/cuda_context.h"

namespace loft::ops {

DeviceFlag::DeviceFlag(int device)
    : device_(device), storage_(allocate_storage(sizeof(uint32_t), Device::cuda(device))) {
  loft::cuda::set_device(device);
  LOFT_CUDA_CHECK(cudaMemsetAsync(ptr(), 0xff, sizeof(uint32_t), loft::cuda::stream(device)));
}

std::optional<uint32_t> DeviceFlag::first_raised() const {
  uint32_t v = kClear;
  copy_bytes(&v, Device::cpu(), ptr(), Device::cuda(device_), sizeof v);  // waits for the stream
  if (v == kClear) return std::nullopt;
  return v;
}

}  // namespace loft::ops
