// A grid-stride elementwise kernel shared by the pointwise ops (convert, axpy, scale, swiglu):
// f maps NIn fp32 inputs to NOut fp32 outputs per element. Each thread loads an element's inputs
// before storing its outputs, so outputs may alias inputs (in-place ops, swiglu_backward).
// An output with an amax pointer also folds max |stored value| into it (warp_amax): the
// per-tensor quantizer that reads the output next then skips its own pass over it.
#pragma once
#include "engine/ops/cuda/kernel_util.cuh"

namespace loft::ops::cuda_kernels {

template <typename T, int N>
struct Ptrs {
  T* p[N];
};

template <typename TIn, typename TOut, int NIn, int NOut, bool kAmax, typename F>
__global__ void map_kernel(Ptrs<const TIn, NIn> in, Ptrs<TOut, NOut> out, Ptrs<unsigned, NOut> amax,
                           int64_t n, bool vec, F f) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  float m[NOut] = {};  // kAmax: max |y| of this thread's elements, per output
  int64_t done = 0;
  if (vec) {
    const int64_t chunks = n / kChunk;
    for (int64_t c = tid; c < chunks; c += stride) {
      float a[NIn][kChunk], b[NOut][kChunk];
#pragma unroll
      for (int k = 0; k < NIn; ++k) load_chunk(in.p[k] + c * kChunk, a[k]);
#pragma unroll
      for (int e = 0; e < kChunk; ++e) {
        float x[NIn], y[NOut];
#pragma unroll
        for (int k = 0; k < NIn; ++k) x[k] = a[k][e];
        f(x, y);
#pragma unroll
        for (int k = 0; k < NOut; ++k) {
          b[k][e] = y[k];
          if constexpr (kAmax) m[k] = fmaxf(m[k], fabsf(y[k]));
        }
      }
#pragma unroll
      for (int k = 0; k < NOut; ++k) store_chunk(out.p[k] + c * kChunk, b[k]);
    }
    done = chunks * kChunk;
  }
  for (int64_t i = done + tid; i < n; i += stride) {
    float x[NIn], y[NOut];
#pragma unroll
    for (int k = 0; k < NIn; ++k) x[k] = to_f32(in.p[k][i]);
    f(x, y);
#pragma unroll
    for (int k = 0; k < NOut; ++k) {
      out.p[k][i] = from_f32<TOut>(y[k]);
      if constexpr (kAmax) m[k] = fmaxf(m[k], fabsf(y[k]));
    }
  }
  if constexpr (kAmax) {
#pragma unroll
    for (int k = 0; k < NOut; ++k)  // uniform over the block: every thread calls or none does
      if (amax.p[k]) warp_amax(stored_abs_max<TOut>(m[k]), amax.p[k]);
  }
}

// Launches map_kernel over n elements on the device's stream; vectorised when every pointer is
// 16-byte aligned. amax: per output, null or an F32 [1] amax (as bits) to fold max |y| into.
template <typename TIn, typename TOut, int NIn, int NOut, typename F>
void launch_map(const char* name, int device, Ptrs<const TIn, NIn> in, Ptrs<TOut, NOut> out,
                int64_t n, F f, Ptrs<unsigned, NOut> amax = {}) {
  if (n == 0) return;
  bool vec = true, any_amax = false;
  for (int k = 0; k < NIn; ++k) vec = vec && reinterpret_cast<uintptr_t>(in.p[k]) % 16 == 0;
  for (int k = 0; k < NOut; ++k) vec = vec && reinterpret_cast<uintptr_t>(out.p[k]) % 16 == 0;
  for (int k = 0; k < NOut; ++k) any_amax = any_amax || amax.p[k];
  constexpr int kThreads = 256;
  const int64_t work = vec ? std::max<int64_t>(n / kChunk, 1) : n;
  const unsigned grid = grid_for(work, kThreads, device);
  cudaStream_t st = loft::cuda::stream(device);
  if (any_amax)
    map_kernel<TIn, TOut, NIn, NOut, true, F><<<grid, kThreads, 0, st>>>(in, out, amax, n, vec, f);
  else
    map_kernel<TIn, TOut, NIn, NOut, false, F><<<grid, kThreads, 0, st>>>(in, out, amax, n, vec, f);
  loft::cuda::check_launch(name);
}

}  // namespace loft::ops::cuda_kernels
