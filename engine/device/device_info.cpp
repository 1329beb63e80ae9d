#include "engine/device/device_info.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iterator>

#ifdef LOFT_WITH_CUDA
#include "engine/device/cuda_context.h"
#endif
#include "engine/core/error.h"
#include "engine/device/memory.h"
#include "engine/device/memory_limit.h"

namespace loft {

DeviceInfo capped_device_info(const DeviceInfo& card, int64_t cap, int64_t held) {
  if (cap <= 0) return card;
  DeviceInfo d = card;
  d.total_bytes = card.total_bytes > 0 ? std::min(cap, card.total_bytes) : cap;
  d.free_bytes = std::clamp<int64_t>(d.total_bytes - held, 0, card.free_bytes);
  return d;
}

std::string gpu_uuid_text(const unsigned char (&bytes)[16]) {
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", unsigned(bytes[i]));
    s += hex;
  }
  return s;
}

DeviceInfo device_info(Device device) {
  if (device.is_cpu()) return {"cpu", 0, 0, ""};
#ifdef LOFT_WITH_CUDA
  cudaDeviceProp prop{};
  LOFT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device.index));
  cuda::stream(device.index);  // loft's context first, so what it holds is measured (and counted)
  const cuda::DeviceMemory m = cuda::memory_info(device.index);
  const int64_t held = int64_t(memory_stats(device).reserved + memory_outside(device).bytes);
  unsigned char uuid[16];
  std::copy(std::begin(prop.uuid.bytes), std::end(prop.uuid.bytes), uuid);
  DeviceInfo d = capped_device_info({prop.name, int64_t(m.total), int64_t(m.free), ""}, gpu_memory_limit(), held);
  d.uuid = gpu_uuid_text(uuid);
  return d;
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
