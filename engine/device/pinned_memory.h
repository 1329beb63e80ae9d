// Host buffers the GPU copies from at full speed (a CUDA model's host-side embedding rows).
#pragma once
#include <cstddef>
#include <memory>

#include "engine/device/memory.h"

namespace loft {

// Page-locked (cudaHostAlloc) when `for_device` is a CUDA device, otherwise ordinary host memory
// as allocate_storage gives. Its Storage's device is the CPU, and the CPU counters
// (memory_stats(Device::cpu())) count it.
std::shared_ptr<Storage> allocate_pinned_host(size_t bytes, Device for_device);

}  // namespace loft
