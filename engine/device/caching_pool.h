// The caching allocator's bookkeeping for one device, apart from the driver calls: freed blocks
// kept by size and handed out again to requests within 1/8 waste, the counters, and the
// --gpu-memory-limit cap (memory_limit.h). cuda_memory_cuda.cpp drives it with cudaMalloc and
// cudaFree; tests/engine/test_caching_pool.cpp with a fake driver on the CPU.
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "engine/device/memory.h"
#include "engine/device/memory_limit.h"

namespace loft {

struct PoolDriver {
  // A fresh block of `size` bytes, or nullptr with the driver's reason in `error`.
  std::function<void*(size_t size, std::string* error)> malloc;
  // Waits until no queued work uses any block (before cached blocks are returned).
  std::function<void()> sync;
  std::function<void(void* ptr)> free;
};

class CachingPool {
 public:
  // `device_name` ("cuda:0") names the device in errors.
  CachingPool(std::string device_name, PoolDriver driver)
      : name_(std::move(device_name)), driver_(std::move(driver)) {}

  struct Block {
    void* ptr;
    size_t size;  // the rounded size held; give it back with the pointer
  };
  // A cached block that fits (within 1/8 waste), else a new one from the driver. Under a cap, a
  // new block must keep reserved + outside() within it. At the cap, or when the driver is out of
  // memory, the smallest larger cached block serves whatever it wastes; without one, cached
  // blocks go back to the driver, largest first, only until the new block fits; then Error "out
  // of GPU memory on cuda:N ... [over --gpu-memory-limit ...]".
  Block acquire(size_t bytes);
  void give_back(void* ptr, size_t size);
  // Returns every cached block to the driver.
  void release_cached();

  MemoryStats stats();
  void reset_peak();
  // Memory the process holds on the device beside this pool (the CUDA context, libraries).
  void add_outside(size_t bytes, bool context_measured);
  OutsideMemory outside();

 private:
  Block take_locked(std::multimap<size_t, void*>::iterator it);
  void release_locked();
  // Returns cached blocks, largest first (one device sync before the first), until done() holds;
  // `pressure`: to make room for a new block (counted in MemoryStats::pressure_returns).
  void release_until_locked(const std::function<bool()>& done, bool pressure);
  bool fits_cap(size_t size, int64_t cap) const;

  std::string name_;
  PoolDriver driver_;
  std::mutex mu_;
  std::multimap<size_t, void*> free_blocks_;  // size -> pointer
  MemoryStats stats_;
  OutsideMemory outside_;
};

}  // namespace loft
