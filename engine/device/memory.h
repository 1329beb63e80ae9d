// Device memory: owned buffers (Storage), the allocators behind them, and byte copies between
// devices. CUDA memory comes from a caching allocator so the step loop never calls cudaMalloc.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>

#include "engine/tensor/device.h"

namespace loft {

class Storage {
 public:
  using Deleter = std::function<void(void*)>;
  Storage(void* data, size_t bytes, Device device, Deleter deleter)
      : data_(data), bytes_(bytes), device_(device), deleter_(std::move(deleter)) {}
  ~Storage() {
    if (deleter_) deleter_(data_);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  size_t bytes_;
  Device device_;
  Deleter deleter_;
};

// A fresh buffer of `bytes` on `device` (64-byte aligned on the CPU, 256 on CUDA). Contents are
// undefined. Throws Error when out of memory, naming the device and size.
std::shared_ptr<Storage> allocate_storage(size_t bytes, Device device);

// Copies n bytes between any two devices. Copies that end on the host wait for the device.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n);
void zero_bytes(void* dst, Device device, size_t n);

struct MemoryStats {
  size_t allocated = 0;       // bytes handed out now
  size_t peak_allocated = 0;  // high-water mark of `allocated` since the last reset
  size_t reserved = 0;        // bytes held from the driver (allocated + cached)
  // Cached blocks handed back to the driver to make room for a new one (at --gpu-memory-limit or
  // a full device), since the process started: each waits for the device's queued work.
  size_t pressure_returns = 0;
};
MemoryStats memory_stats(Device device);
void reset_peak_memory(Device device);
// Returns cached blocks to the driver (CUDA); no-op on the CPU.
void release_cached_memory(Device device);

// Waits for all queued work on the device (no-op on the CPU).
void synchronize(Device device);

// Makes `device` the calling thread's current CUDA device (a data-parallel worker thread drives one
// GPU: kernels are launched on that GPU's stream and need it current). No-op for the CPU.
void bind_thread(Device device);

}  // namespace loft
