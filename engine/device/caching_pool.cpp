#include "engine/device/caching_pool.h"

#include <algorithm>
#include <iterator>

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
  // The smallest cached block that holds `size`: taken when it wastes at most 1/8, or, at the
  // cap or the device's end, whatever it wastes (below).
  const auto cached = free_blocks_.lower_bound(size);
  if (cached != free_blocks_.end() && cached->first <= size + size / 8) return take_locked(cached);
  // Under pressure a larger cached block serves before any goes back to the driver: returning
  // blocks costs a device sync, and a training step asks for the same sizes again in its next
  // step, which would return them again (under a 24 GiB cap a 70B step ran 1.5x slower so).
  if (const int64_t cap = gpu_memory_limit(); cap > 0 && !fits_cap(size, cap)) {
    if (cached != free_blocks_.end()) return take_locked(cached);
    release_until_locked([&] { return fits_cap(size, cap); }, /*pressure=*/true);
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
  if (!ptr && cached != free_blocks_.end()) return take_locked(cached);
  if (!ptr) release_until_locked([&] { return (ptr = driver_.malloc(size, &error)) != nullptr; }, true);
  if (!ptr)
    throw Error(cat("out of GPU memory on ", name_, " allocating ", mib(size), " (", mib(stats_.allocated),
                    " in use by loft, ", mib(stats_.reserved), " reserved): ", error));
  stats_.reserved += size;
  stats_.allocated += size;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return {ptr, size};
}

CachingPool::Block CachingPool::take_locked(std::multimap<size_t, void*>::iterator it) {
  const Block b{it->second, it->first};
  free_blocks_.erase(it);
  stats_.allocated += b.size;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return b;
}

void CachingPool::give_back(void* ptr, size_t size) {
  std::lock_guard lock(mu_);
  stats_.allocated -= size;
  free_blocks_.emplace(size, ptr);
}

void CachingPool::release_locked() {
  release_until_locked([] { return false; }, /*pressure=*/false);
}

void CachingPool::release_until_locked(const std::function<bool()>& done, bool pressure) {
  if (free_blocks_.empty()) return;
  driver_.sync();
  while (!free_blocks_.empty()) {
    const auto largest = std::prev(free_blocks_.end());
    driver_.free(largest->second);
    stats_.reserved -= largest->first;
    free_blocks_.erase(largest);
    if (pressure) ++stats_.pressure_returns;
    if (done()) return;
  }
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
