// The CUDA side of memory.h, implemented in cuda_memory_cuda.cpp (built only with CUDA).
#pragma once
#include <cstddef>

#include "engine/device/memory.h"

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
}  // namespace loft::cuda
