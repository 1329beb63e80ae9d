// The CUDA allocator: a CachingPool (caching_pool.h) per device over cudaMalloc/cudaFree. All loft
// work on a device runs on one stream, so a block freed on the host can be reused at once: later
// kernels are queued after the ones that still read it.
#include <algorithm>
#include <array>
#include <mutex>
#include <vector>

#include "engine/device/caching_pool.h"
#include "engine/device/cuda_context.h"
#include "engine/device/cuda_memory.h"

namespace loft::cuda {

namespace {
constexpr int kMaxDevices = 16;

PoolDriver driver(int device) {
  PoolDriver d;
  d.malloc = [device](size_t size, std::string* error) -> void* {
    set_device(device);
    void* ptr = nullptr;
    const cudaError_t err = cudaMalloc(&ptr, size);
    if (err == cudaSuccess) return ptr;
    cudaGetLastError();
    *error = cudaGetErrorString(err);
    return nullptr;
  };
  d.sync = [device] {
    set_device(device);
    LOFT_CUDA_CHECK(cudaStreamSynchronize(stream(device)));
  };
  d.free = [](void* ptr) { LOFT_CUDA_CHECK(cudaFree(ptr)); };
  return d;
}

// Never destroyed: a Storage released during static destruction still finds its pool.
CachingPool& pool(int device) {
  static std::array<std::once_flag, kMaxDevices> once;
  static auto* pools = new std::array<CachingPool*, kMaxDevices>{};
  LOFT_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device, " out of range");
  std::call_once(once[size_t(device)],
                 [device] { (*pools)[size_t(device)] = new CachingPool(cat("cuda:", device), driver(device)); });
  return *(*pools)[size_t(device)];
}

}  // namespace

std::shared_ptr<Storage> allocate(size_t bytes, int device) {
  stream(device);  // the context first, so what it holds is measured before the pool's first block
  CachingPool& p = pool(device);
  const CachingPool::Block b = p.acquire(bytes);
  return std::make_shared<Storage>(b.ptr, bytes, Device::cuda(device),
                                   [&p, size = b.size](void* ptr) { p.give_back(ptr, size); });
}

void add_outside(int device, size_t bytes, bool context_measured) {
  pool(device).add_outside(bytes, context_measured);
}

OutsideMemory outside(int device) { return pool(device).outside(); }

void count_outside_pool(const std::vector<int>& devices, const std::function<void()>& fn) {
  std::vector<size_t> free_before, reserved_before;
  for (int d : devices) {
    stream(d);  // loft's context first: its own memory is measured as such (cuda_context_cuda.cpp)
    free_before.push_back(memory_info(d).free);
    reserved_before.push_back(pool(d).stats().reserved);
  }
  fn();
  for (size_t i = 0; i < devices.size(); ++i) {
    const int d = devices[i];
    const size_t free_after = memory_info(d).free, reserved_after = pool(d).stats().reserved;
    const int64_t taken = int64_t(free_before[i]) - int64_t(free_after) -
                          (int64_t(reserved_after) - int64_t(reserved_before[i]));
    if (taken > 0) add_outside(d, size_t(taken), false);
  }
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

MemoryStats stats(int device) { return pool(device).stats(); }

void reset_peak(int device) { pool(device).reset_peak(); }

void release_cached(int device) { pool(device).release_cached(); }

void synchronize(int device) {
  set_device(device);
  LOFT_CUDA_CHECK(cudaStreamSynchronize(stream(device)));
}

void bind_thread(int device) { set_device(device); }

}  // namespace loft::cuda
