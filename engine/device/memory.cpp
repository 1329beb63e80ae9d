#include "engine/device/memory.h"
#include "engine/device/pinned_memory.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "engine/core/error.h"
#ifdef LOFT_WITH_CUDA
#include "engine/device/cuda_memory.h"
#endif

namespace loft {

namespace {
struct CpuCounters {
  std::mutex mu;
  MemoryStats s;
};
CpuCounters& cpu_counters() {
  static CpuCounters c;
  return c;
}

[[noreturn, maybe_unused]] void no_cuda() {
  throw Error("this loft was built without the CUDA backend; use --device cpu");
}

// Host memory from `alloc` (64-byte rounded), counted in the CPU counters and released by `release`.
std::shared_ptr<Storage> counted_host(size_t bytes, void* (*alloc)(size_t), void (*release)(void*)) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = rounded ? alloc(rounded) : nullptr;
  if (rounded && !p) throw Error(cat("out of host memory allocating ", bytes, " bytes"));
  {
    auto& c = cpu_counters();
    std::lock_guard lock(c.mu);
    c.s.allocated += rounded;
    c.s.reserved = c.s.allocated;
    c.s.peak_allocated = std::max(c.s.peak_allocated, c.s.allocated);
  }
  return std::make_shared<Storage>(p, bytes, Device::cpu(), [rounded, release](void* q) {
    if (q) release(q);
    auto& c = cpu_counters();
    std::lock_guard lock(c.mu);
    c.s.allocated -= rounded;
    c.s.reserved = c.s.allocated;
  });
}

void* aligned_host(size_t bytes) { return std::aligned_alloc(64, bytes); }
void free_host(void* p) { std::free(p); }
}  // namespace

std::shared_ptr<Storage> allocate_storage(size_t bytes, Device device) {
  if (device.is_cuda()) {
#ifdef LOFT_WITH_CUDA
    return cuda::allocate(bytes, device.index);
#else
    no_cuda();
#endif
  }
  return counted_host(bytes, aligned_host, free_host);
}

std::shared_ptr<Storage> allocate_pinned_host(size_t bytes, Device for_device) {
#ifdef LOFT_WITH_CUDA
  if (for_device.is_cuda()) return counted_host(bytes, cuda::allocate_pinned, cuda::free_pinned);
#endif
  (void)for_device;
  return counted_host(bytes, aligned_host, free_host);
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n) {
  if (n == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, n);
    return;
  }
#ifdef LOFT_WITH_CUDA
  cuda::copy(dst, dst_device, src, src_device, n);
#else
  no_cuda();
#endif
}

void zero_bytes(void* dst, Device device, size_t n) {
  if (n == 0) return;
  if (device.is_cpu()) {
    std::memset(dst, 0, n);
    return;
  }
#ifdef LOFT_WITH_CUDA
  cuda::zero(dst, device.index, n);
#else
  no_cuda();
#endif
}

MemoryStats memory_stats(Device device) {
  if (device.is_cpu()) {
    auto& c = cpu_counters();
    std::lock_guard lock(c.mu);
    return c.s;
  }
#ifdef LOFT_WITH_CUDA
  return cuda::stats(device.index);
#else
  no_cuda();
#endif
}

void reset_peak_memory(Device device) {
  if (device.is_cpu()) {
    auto& c = cpu_counters();
    std::lock_guard lock(c.mu);
    c.s.peak_allocated = c.s.allocated;
    return;
  }
#ifdef LOFT_WITH_CUDA
  cuda::reset_peak(device.index);
#else
  no_cuda();
#endif
}

void release_cached_memory(Device device) {
  if (device.is_cpu()) return;
#ifdef LOFT_WITH_CUDA
  cuda::release_cached(device.index);
#else
  no_cuda();
#endif
}

void synchronize(Device device) {
  if (device.is_cpu()) return;
#ifdef LOFT_WITH_CUDA
  cuda::synchronize(device.index);
#else
  no_cuda();
#endif
}

void bind_thread(Device device) {
  if (device.is_cpu()) return;
#ifdef LOFT_WITH_CUDA
  cuda::bind_thread(device.index);
#else
  no_cuda();
#endif
}

}  // namespace loft
