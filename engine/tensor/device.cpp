#include "engine/tensor/device.h"

#include <charconv>
#include <ostream>

#include "engine/core/error.h"

#ifdef LOFT_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace loft {

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

bool cuda_compiled() {
#ifdef LOFT_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef LOFT_WITH_CUDA
  static const int count = [] {
    int n = 0;
    // No driver or no device is not an error here: it means "no GPU".
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
#else
  return 0;
#endif
}

Device resolve_device(std::string_view spec, std::ostream* notice) {
  if (spec == "cpu") return Device::cpu();
  if (spec == "auto") {
    if (cuda_device_count() > 0) return Device::cuda(0);
    if (notice)
      *notice << "notice: no CUDA GPU found" << (cuda_compiled() ? "" : " (built without CUDA)")
              << "; running on the CPU backend\n";
    return Device::cpu();
  }
  if (spec.substr(0, 4) == "cuda") {
    int index = 0;
    if (spec.size() > 4) {
      auto rest = spec.substr(4);
      if (rest[0] != ':' ||
          std::from_chars(rest.data() + 1, rest.data() + rest.size(), index).ptr !=
              rest.data() + rest.size() || rest.size() < 2 || index < 0)
        throw UsageError(cat("--device: '", spec, "' is not auto, cpu, cuda or cuda:N"));
    }
    if (!cuda_compiled())
      throw UsageError(cat("--device ", spec, ": this loft was built without the CUDA backend"));
    const int n = cuda_device_count();
    if (n == 0) throw UsageError(cat("--device ", spec, ": no CUDA GPU found on this machine"));
    if (index >= n)
      throw UsageError(cat("--device ", spec, ": only ", n, " CUDA device(s) present"));
    return Device::cuda(index);
  }
  throw UsageError(cat("--device: '", spec, "' is not auto, cpu, cuda or cuda:N"));
}

}  // namespace loft
