#include "engine/device/nvml_memory.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <mutex>

namespace loft::cuda {

namespace {

// The few NVML entry points used, declared as nvml.h (which the toolkit does not always ship)
// declares them: every call returns 0 (NVML_SUCCESS) on success.
struct NvmlMemory {
  unsigned long long total, free, used;  // nvmlMemory_t (version 1)
};
using NvmlDevice = void*;
struct Nvml {
  int (*init)() = nullptr;                                          // nvmlInit_v2
  int (*by_bus_id)(const char*, NvmlDevice*) = nullptr;             // nvmlDeviceGetHandleByPciBusId_v2
  int (*memory)(NvmlDevice, NvmlMemory*) = nullptr;                 // nvmlDeviceGetMemoryInfo
};

// Loaded and initialised once; all null when the library or a symbol is missing.
const Nvml& nvml() {
  static std::once_flag once;
  static Nvml api;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;  // stays loaded for the process when found
    Nvml a;
    a.init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    a.by_bus_id = reinterpret_cast<int (*)(const char*, NvmlDevice*)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    a.memory = reinterpret_cast<int (*)(NvmlDevice, NvmlMemory*)>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
    if (a.init && a.by_bus_id && a.memory && a.init() == 0) api = a;
  });
  return api;
}

}  // namespace

std::optional<size_t> nvml_used_bytes(int device) {
  const Nvml& n = nvml();
  if (!n.memory) return std::nullopt;
  // The PCI address maps CUDA's numbering (CUDA_VISIBLE_DEVICES, fastest-first order) to NVML's.
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  NvmlDevice handle = nullptr;
  NvmlMemory m{};
  if (n.by_bus_id(bus_id, &handle) != 0 || n.memory(handle, &m) != 0) return std::nullopt;
  return size_t(m.used);
}

}  // namespace loft::cuda
