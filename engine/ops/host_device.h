// LOFT_HOST_DEVICE marks a small function that compiles as host code and, under nvcc, as device
// code too, so a CPU reference and a CUDA kernel share it word for word.
#pragma once

#if defined(__CUDACC__)
#define LOFT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define LOFT_HOST_DEVICE inline
#endif
