// Caching CUDA allocator. Freed blocks go to a per-device free list keyed by size and are handed
// out again to requests that fit within 1/8 waste; the driver is asked only on a miss. All loft
// work on a device runs on one stream, so a block freed on the host can be reused at once: later
// kernels are queued after the ones that still read it.
#include <map>
#include <mutex>
#include <vector>

#include "engine/device/cuda_context.h"
#include "engine/device/cuda_memory.h"

namespace loft::cuda {

namespace {
constexpr int kMaxDevices = 16;

size_t round_size(size_t bytes) {
  if (bytes < (1u << 20)) return (bytes + 511) / 512 * 512;
  return (bytes + (128u << 10) - 1) / (128u << 10) * (128u << 10);
}

struct DeviceCache {
  std::mutex mu;
  std::multimap<size_t, void*> free_blocks;  // size -> pointer
  MemoryStats stats;
};

DeviceCache& cache(int device) {
  static DeviceCache caches[kMaxDevices];
  LOFT_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device, " out of range");
  return caches[device];
}

void release_locked(DeviceCache& c, int device) {
  if (c.free_blocks.empty()) return;
  set_device(device);
  LOFT_CUDA_CHECK(cudaStreamSynchronize(stream(device)));
  for (auto& [size, ptr] : c.free_blocks) {
    LOFT_CUDA_CHECK(cudaFree(ptr));
    c.stats.reserved -= size;
  }
  c.free_blocks.clear();
}

void give_back(int device, void* ptr, size_t size) {
  DeviceCache& c = cache(device);
  std::lock_guard lock(c.mu);
  c.stats.allocated -= size;
  c.free_blocks.emplace(size, ptr);
}

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }
}  // namespace

std::shared_ptr<Storage> allocate(size_t bytes, int device) {
  const size_t size = round_size(std::max<size_t>(bytes, 1));
  DeviceCache& c = cache(device);
  void* ptr = nullptr;
  {
    std::lock_guard lock(c.mu);
    auto it = c.free_blocks.lower_bound(size);
    if (it != c.free_blocks.end() && it->first <= size + size / 8) {
      ptr = it->second;
      const size_t got = it->first;
      c.free_blocks.erase(it);
      c.stats.allocated += got;
      c.stats.peak_allocated = std::max(c.stats.peak_allocated, c.stats.allocated);
      return std::make_shared<Storage>(ptr, bytes, Device::cuda(device),
                                       [device, got](void* p) { give_back(device, p, got); });
    }
    set_device(device);
    cudaError_t err = cudaMalloc(&ptr, size);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      release_locked(c, device);  // hand cached blocks back and try once more
      err = cudaMalloc(&ptr, size);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      throw Error(cat("out of GPU memory on cuda:", device, " allocating ", mib(size), " (",
                      mib(c.stats.allocated), " in use by loft, ", mib(c.stats.reserved),
                      " reserved): ", cudaGetErrorString(err)));
    }
    c.stats.reserved += size;
    c.stats.allocated += size;
    c.stats.peak_allocated = std::max(c.stats.peak_allocated, c.stats.allocated);
  }
  return std::make_shared<Storage>(ptr, bytes, Device::cuda(device),
                                   [device, size](void* p) { give_back(device, p, size); });
}

void* allocate_pinned(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw Error(cat("out of host memory allocating ", bytes, " pinned bytes: ", cudaGetErrorString(err)));
  }
  return p;
}

void free_pinned(void* p) { cudaFreeHost(p); }

void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t n) {
  const int dev = dst_device.is_cuda() ? dst_device.index : src_device.index;
  set_device(dev);
  LOFT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream(dev)));
  if (dst_device.is_cpu() || src_device.is_cpu()) {
    // Host buffers are pageable: wait so the caller may read (or free) them at once.
    LOFT_CUDA_CHECK(cudaStreamSynchronize(stream(dev)));
  }
}

void zero(void* dst, int device, size_t n) {
  set_device(device);
  LOFT_CUDA_CHECK(cudaMemsetAsync(dst, 0, n, stream(device)));
}

MemoryStats stats(int device) {
  DeviceCache& c = cache(device);
  std::lock_guard lock(c.mu);
  return c.stats;
}

void reset_peak(int device) {
  DeviceCache& c = cache(device);
  std::lock_guard lock(c.mu);
  c.stats.peak_allocated = c.stats.allocated;
}

void release_cached(int device) {
  DeviceCache& c = cache(device);
  std::lock_guard lock(c.mu);
  release_locked(c, device);
}

void synchronize(int device) {
  set_device(device);
  LOFT_CUDA_CHECK(cudaStreamSynchronize(stream(device)));
}

void bind_thread(int device) { set_device(device); }

}  // namespace loft::cuda
