// CUDA-only plumbing shared by the CUDA backend: error checks that name the failing call, the
// stream every loft op runs on, and the cuBLAS/cuBLASLt handles. Include only from CUDA code.
#pragma once
#include <cuda_runtime.h>

#include "engine/core/error.h"
#include "engine/device/cublas_api.h"

namespace loft::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t st, const char* call, const char* file, int line);

// The stream loft's work on `device` is queued on (created on first use, one per device).
cudaStream_t stream(int device);
cublasLtHandle_t cublaslt_handle(int device);
// A cuBLAS (v2) handle bound to stream(device) and the same workspace (the one stream orders their
// use), default math: CUBLAS_COMPUTE_32F on F32 data stays in full fp32 (no TF32).
cublasHandle_t cublas_handle(int device);
// A per-device cuBLASLt workspace (32 MiB), allocated once.
void* cublaslt_workspace(int device, size_t* bytes);
// cudaMemGetInfo of `device`; the calling thread's current device is kept.
struct DeviceMemory {
  size_t free = 0, total = 0;
};
DeviceMemory memory_info(int device);
// Makes `device` current for this thread (cheap when it already is).
void set_device(int device);
// Checks for an error from the last kernel launch, naming it.
void check_launch(const char* kernel_name);

}  // namespace loft::cuda

#define LOFT_CUDA_CHECK(call)                                                            \
  do {                                                                                   \
    cudaError_t err_ = (call);                                                           \
    if (err_ != cudaSuccess) ::loft::cuda::throw_cuda_error(err_, #call, __FILE__, __LINE__); \
  } while (0)

#define LOFT_CUBLAS_CHECK(call)                                                            \
  do {                                                                                     \
    cublasStatus_t st_ = (call);                                                           \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                      \
      ::loft::cuda::throw_cublas_error(st_, #call, __FILE__, __LINE__);                    \
  } while (0)
