// Device memory in use as the NVIDIA driver's management library (NVML) reports it. Unlike
// cudaMemGetInfo it needs no CUDA context, so it can see what creating one costs
// (cuda_context_cuda.cpp). libnvidia-ml.so.1 ships with the driver and is loaded at first use.
#pragma once
#include <cstddef>
#include <optional>

namespace loft::cuda {

// Bytes used on CUDA device `device` by every process; nullopt when NVML cannot be loaded or
// does not know the device. Makes no CUDA context.
std::optional<size_t> nvml_used_bytes(int device);

}  // namespace loft::cuda
