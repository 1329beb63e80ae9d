#include "engine/device/caching_pool.h"

#include <algorithm>

#include "engine/core/byte_size.h"
#include "engine/core/error.h"
#include "engine/device/memory_limit.h"

namespace loft {

namespace {

size_t round_size(size_t bytes) {
  if (bytes < (1u << 20)) return (bytes + 511) / 512 * 512;
  return (bytes + (128u << 10) - 1) / (128u << 10) * (128u << 10);
}

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

bool CachingPool::fits_cap(size_t size, int64_t cap) const {
  const size_t held = stats_.reserved + outside_.bytes;
  return held <= size_t(cap) && size <= size_t(cap) - held;
}

CachingPool::Block CachingPool::acquire(size_t bytes) {
  const size_t size = round_size(std::max<size_t>(bytes, 1));
  std::lock_guard lock(mu_);
  auto it = free_blocks_.lower_bound(size);
  if (it != free_blocks_.end() && it->first <= size + size / 8) {
    const Block b{it->second, it->first};
    free_blocks_.erase(it);
    stats_.allocated += b.size;
    stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
    return b;
  }
  if (const int64_t cap = gpu_memory_limit(); cap > 0 && !fits_cap(size, cap)) {
    release_locked();  // as on a real out-of-memory: hand cached blocks back first
    if (!fits_cap(size, cap))
      throw Error(cat("out of GPU memory on ", name_, " allocating ", mib(size), " over --gpu-memory-limit ",
                      format_byte_size(cap), " (", mib(stats_.allocated), " in use by loft, ",
                      mib(stats_.reserved - stats_.allocated), " cached, ", mib(outside_.bytes),
                      outside_.context_measured ? " CUDA context and libraries"
                                              : " cuBLAS and NCCL; the CUDA context itself not measured",
                      ")"));
  }
  std::string error;
  void* ptr = driver_.malloc(size, &error);
  if (!ptr) {
    release_locked();  // hand cached blocks back and try once more
    ptr = driver_.malloc(size, &error);
  }
  if (!ptr)
    throw Error(cat("out of GPU memory on ", name_, " allocating ", mib(size), " (", mib(stats_.allocated),
                    " in use by loft, ", mib(stats_.reserved), " reserved): ", error));
  stats_.reserved += size;
  stats_.allocated += size;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return {ptr, size};
}

void CachingPool::give_back(void* ptr, size_t size) {
  std::lock_guard lock(mu_);
  stats_.allocated -= size;
  free_blocks_.emplace(size, ptr);
}

void CachingPool::release_locked() {
  if (free_blocks_.empty()) return;
  driver_.sync();
  for (auto& [size, ptr] : free_blocks_) {
    driver_.free(ptr);
    stats_.reserved -= size;
  }
  free_blocks_.clear();
}

void CachingPool::release_cached() {
  std::lock_guard lock(mu_);
  release_locked();
}

MemoryStats CachingPool::stats() {
  std::lock_guard lock(mu_);
  return stats_;
}

void CachingPool::reset_peak() {
  std::lock_guard lock(mu_);
  stats_.peak_allocated = stats_.allocated;
}

void CachingPool::add_outside(size_t bytes, bool context_measured) {
  std::lock_guard lock(mu_);
  outside_.bytes += bytes;
  outside_.context_measured = outside_.context_measured || context_measured;
}

OutsideMemory CachingPool::outside() {
  std::lock_guard lock(mu_);
  return outside_;
}

}  // namespace loft
