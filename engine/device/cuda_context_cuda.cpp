#include <mutex>

#include "engine/device/cuda_context.h"

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
    LOFT_CUDA_CHECK(cudaSetDevice(device));
    LOFT_CUDA_CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
    LOFT_CUBLAS_CHECK(cublasLtCreate(&c.lt));
    LOFT_CUDA_CHECK(cudaMalloc(&c.workspace, kWorkspaceBytes));
    LOFT_CUBLAS_CHECK(cublasCreate(&c.blas));
    LOFT_CUBLAS_CHECK(cublasSetStream(c.blas, c.stream));
    LOFT_CUBLAS_CHECK(cublasSetWorkspace(c.blas, c.workspace, kWorkspaceBytes));
    LOFT_CUBLAS_CHECK(cublasSetMathMode(c.blas, CUBLAS_DEFAULT_MATH));
  });
  return c;
}
}  // namespace

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  cudaGetLastError();  // clear a sticky-free error so later calls can report their own
  throw Error(cat("CUDA error in ", call, " (", file, ":", line, "): ", cudaGetErrorName(err), ": ",
                  cudaGetErrorString(err)));
}

void throw_cublas_error(cublasStatus_t st, const char* call, const char* file, int line) {
  throw Error(cat("cuBLAS error in ", call, " (", file, ":", line, "): ", cublasGetStatusName(st),
                  ": ", cublasGetStatusString(st)));
}

void set_device(int device) {
  thread_local int current = -1;
  if (current != device) {
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
