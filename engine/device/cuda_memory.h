// The CUDA side of memory.h, implemented in cuda_memory_cuda.cpp (built only with CUDA).
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

#include "engine/device/memory.h"
#include "engine/device/memory_limit.h"

namespace loft::cuda {
std::shared_ptr<Storage> allocate(size_t bytes, int device);
// Page-locked host memory (cudaHostAlloc) and its release.
void* allocate_pinned(size_t bytes);
void free_pinned(void* p);
void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t n);
void zero(void* dst, int device, size_t n);
MemoryStats stats(int device);
void reset_peak(int device);
void release_cached(int device);
void synchronize(int device);
void bind_thread(int device);  // cuda::set_device, for code that cannot include cuda_context.h
// Memory the process holds on `device` beside the allocator (memory_limit.h's memory_outside), and
// whether it includes the CUDA context itself.
void add_outside(int device, size_t bytes, bool context_measured);
OutsideMemory outside(int device);
// Runs `fn`, which makes a library allocate device memory of its own on `devices` (NCCL's
// communicators, its first collective), and adds to each device's outside memory what its
// free memory dropped by, less what loft's allocator took meanwhile.
void count_outside_pool(const std::vector<int>& devices, const std::function<void()>& fn);
}  // namespace loft::cuda
