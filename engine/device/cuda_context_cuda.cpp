// The per-device CUDA context, stream and cuBLAS/cuBLASLt handles, made at loft's first touch of
// a device, and what they hold in device memory (memory_outside, for --gpu-memory-limit).
#include <mutex>
#include <optional>

#include "engine/device/cuda_context.h"
#include "engine/device/cuda_memory.h"
#include "engine/device/memory_limit.h"
#include "engine/device/nvml_memory.h"

namespace loft::cuda {

namespace {
constexpr int kMaxDevices = 16;
constexpr size_t kWorkspaceBytes = 32u << 20;

struct Context {
  std::once_flag once;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  cublasHandle_t blas = nullptr;
  void* workspace = nullptr;
};

Context& context(int device) {
  static Context contexts[kMaxDevices];
  LOFT_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device, " out of range");
  Context& c = contexts[device];
  std::call_once(c.once, [&] {
    // Made on `device`, then the caller's device is current again: set_device's per-thread cache
    // must stay true, or a later set_device would skip a switch that is needed.
    int current = 0;
    LOFT_CUDA_CHECK(cudaGetDevice(&current));
    struct Restore {
      int d;
      ~Restore() { cudaSetDevice(d); }
    } restore{current};
    // Under a cap, what the context itself holds: NVML's count before and after it exists
    // (cudaMemGetInfo needs a context). Not asked without a cap: loading NVML takes time.
    const std::optional<size_t> before = gpu_memory_limit() > 0 ? nvml_used_bytes(device) : std::nullopt;
    LOFT_CUDA_CHECK(cudaSetDevice(device));
    LOFT_CUDA_CHECK(cudaFree(nullptr));  // makes the primary context now if it is not yet
    std::optional<size_t> context_bytes;
    if (const std::optional<size_t> after = before ? nvml_used_bytes(device) : std::nullopt)
      context_bytes = *after > *before ? *after - *before : 0;
    const size_t free_before_handles = memory_info(device).free;
    LOFT_CUDA_CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
    LOFT_CUBLAS_CHECK(cublas_api().cublasLtCreate(&c.lt));
    LOFT_CUDA_CHECK(cudaMalloc(&c.workspace, kWorkspaceBytes));
    LOFT_CUBLAS_CHECK(cublas_api().cublasCreate(&c.blas));
    LOFT_CUBLAS_CHECK(cublas_api().cublasSetStream(c.blas, c.stream));
    LOFT_CUBLAS_CHECK(cublas_api().cublasSetWorkspace(c.blas, c.workspace, kWorkspaceBytes));
    LOFT_CUBLAS_CHECK(cublas_api().cublasSetMathMode(c.blas, CUBLAS_DEFAULT_MATH));
    const size_t free_after_handles = memory_info(device).free;
    const size_t handles =
        free_before_handles > free_after_handles ? free_before_handles - free_after_handles : 0;
    add_outside(device, handles + context_bytes.value_or(0), context_bytes.has_value());
  });
  return c;
}
}  // namespace

DeviceMemory memory_info(int device) {
  int current = 0;
  LOFT_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device) LOFT_CUDA_CHECK(cudaSetDevice(device));  // cudaMemGetInfo reads the current one
  DeviceMemory m;
  const cudaError_t err = cudaMemGetInfo(&m.free, &m.total);
  if (current != device) LOFT_CUDA_CHECK(cudaSetDevice(current));
  LOFT_CUDA_CHECK(err);
  return m;
}

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  cudaGetLastError();  // clear a sticky-free error so later calls can report their own
  throw Error(cat("CUDA error in ", call, " (", file, ":", line, "): ", cudaGetErrorName(err), ": ",
                  cudaGetErrorString(err)));
}

void throw_cublas_error(cublasStatus_t st, const char* call, const char* file, int line) {
  const CublasApi& api = cublas_api();
  throw Error(cat("cuBLAS error in ", call, " (", file, ":", line, "): ", api.cublasGetStatusName(st),
                  ": ", api.cublasGetStatusString(st)));
}

void set_device(int device) {
  thread_local int current = -1;
  if (current != device) {
    context(device);  // loft's context before anything else makes one, so it is measured
    LOFT_CUDA_CHECK(cudaSetDevice(device));
    current = device;
  }
}

cudaStream_t stream(int device) { return context(device).stream; }
cublasLtHandle_t cublaslt_handle(int device) { return context(device).lt; }
cublasHandle_t cublas_handle(int device) { return context(device).blas; }
void* cublaslt_workspace(int device, size_t* bytes) {
  *bytes = kWorkspaceBytes;
  return context(device).workspace;
}

void check_launch(const char* kernel_name) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Error(cat("CUDA kernel launch failed: ", kernel_name, ": ", cudaGetErrorName(err), ": ",
                    cudaGetErrorString(err)));
}

}  // namespace loft::cuda
