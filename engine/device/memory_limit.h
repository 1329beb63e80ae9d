// --gpu-memory-limit: a cap that makes every GPU loft uses behave as a card of that size
// (docs/memory.md). The caching allocator refuses to hold more than the cap less what the process
// holds beside it (memory_outside), and device_info reports the cap as the card's memory,
// so every fit check reads it without code of its own.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/tensor/device.h"

namespace loft {

// Bytes; 0 = no cap. Applies to every CUDA device of the process from the next allocation on.
void set_gpu_memory_limit(int64_t bytes);
int64_t gpu_memory_limit();

// Device memory the process holds beside the allocator, as measured (docs/memory.md): the CUDA
// context, the cuBLAS/cuBLASLt handles and workspace, NCCL's buffers. Zero on the CPU.
struct OutsideMemory {
  size_t bytes = 0;
  bool context_measured = false;  // whether `bytes` includes the CUDA context itself
};
OutsideMemory memory_outside(Device device);

}  // namespace loft
