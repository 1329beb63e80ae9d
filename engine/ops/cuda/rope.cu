// RoPE (rotate-half), in place. One block per token: the token's cos/sin table (head_dim/2
// angles, θ = float(pos)·inv_freq[i] with full-precision sincosf) is built once in shared memory
// and applied to every head.
#include "engine/ops/ops.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/rope_angles.cuh"

namespace loft::ops {

using namespace cuda_kernels;

namespace {

// kAmax: amax takes max |x| after the rotation (ops.h: x_amax).
template <typename T, bool kAmax>
__global__ void rope_kernel(T* x, const int32_t* positions, const float* inv_freq, int heads,
                            int half, bool inverse, unsigned* amax) {
  extern __shared__ float table[];  // cos[half], then sin[half]
  const int64_t t = blockIdx.x;
  rope_angles(table, positions[t], inv_freq, half, inverse);
  T* xt = x + t * heads * 2 * half;
  float m = 0.0f;
  for (int idx = threadIdx.x; idx < heads * half; idx += blockDim.x) {
    const int h = idx / half, i = idx - h * half;
    T* xh = xt + int64_t(h) * 2 * half;
    const float a = to_f32(xh[i]), b = to_f32(xh[i + half]);
    const float c = table[i], s = table[half + i];
    const float lo = a * c - b * s, hi = b * c + a * s;
    xh[i] = from_f32<T>(lo);
    xh[i + half] = from_f32<T>(hi);
    if constexpr (kAmax) m = fmaxf(m, fmaxf(fabsf(lo), fabsf(hi)));
  }
  if constexpr (kAmax) warp_amax(stored_abs_max<T>(m), amax);
}

// The same rotation with each thread taking kChunk consecutive pairs of one head (16-byte loads
// and stores of both halves) where the rows allow it (half a multiple of kChunk, 16-byte aligned
// rows); the per-element arithmetic is rope_kernel's expression, element for element.
template <typename T, bool kAmax>
__global__ void rope_chunked_kernel(T* x, const int32_t* positions, const float* inv_freq, int heads,
                                    int half, bool inverse, unsigned* amax) {
  extern __shared__ float table[];  // cos[half], then sin[half]
  const int64_t t = blockIdx.x;
  rope_angles(table, positions[t], inv_freq, half, inverse);
  T* xt = x + t * heads * 2 * half;
  const int chunks = half / kChunk;
  float m = 0.0f;
  for (int idx = threadIdx.x; idx < heads * chunks; idx += blockDim.x) {
    const int h = idx / chunks, i0 = (idx - h * chunks) * kChunk;
    T* xh = xt + int64_t(h) * 2 * half;
    float a[kChunk], b[kChunk], lo[kChunk], hi[kChunk];
    load_chunk(xh + i0, a);
    load_chunk(xh + i0 + half, b);
#pragma unroll
    for (int e = 0; e < kChunk; ++e) {
      const float c = table[i0 + e], s = table[half + i0 + e];
      lo[e] = a[e] * c - b[e] * s;
      hi[e] = b[e] * c + a[e] * s;
      if constexpr (kAmax) m = fmaxf(m, fmaxf(fabsf(lo[e]), fabsf(hi[e])));
    }
    store_chunk(xh + i0, lo);
    store_chunk(xh + i0 + half, hi);
  }
  if constexpr (kAmax) warp_amax(stored_abs_max<T>(m), amax);
}

}  // namespace

void cuda::rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse,
                Tensor* x_amax) {
  const int dev = use_device(x);
  if (x.numel() == 0) return;
  const int64_t tokens = x.size(0), heads = x.size(1), half = x.size(2) / 2;
  LOFT_CHECK(tokens <= INT32_MAX && heads * half <= INT32_MAX, "rope: ", x.str(),
             " too large for one launch");
  // Whole warps for `work` items of a token (one per thread), 1 to 8 of them.
  auto threads_for = [](int64_t work) { return int(std::clamp<int64_t>((work + 31) / 32 * 32, 32, 256)); };
  const size_t shared = size_t(2 * half) * sizeof(float);
  LOFT_CHECK(shared <= 48 * 1024, "rope: head_dim ", 2 * half, " too large");
  // Rows of 2·half elements start 16-byte aligned when the tensor does and half is a multiple of
  // kChunk (then every row's byte length is too).
  const bool chunked = half % kChunk == 0 && aligned16(x.data());
  dispatch_activation(x.dtype(), "rope", [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_flags(chunked, x_amax != nullptr, [&](auto chunks, auto with_amax) {
      constexpr bool kAmax = decltype(with_amax)::value;
      if constexpr (decltype(chunks)::value)
        rope_chunked_kernel<T, kAmax><<<unsigned(tokens), threads_for(heads * (half / kChunk)), shared, loft::cuda::stream(dev)>>>(
            x.ptr<T>(), positions.ptr<const int32_t>(), inv_freq.ptr<const float>(), int(heads),
            int(half), inverse, amax_out_bits(x_amax));
      else
        rope_kernel<T, kAmax><<<unsigned(tokens), threads_for(heads * half), shared, loft::cuda::stream(dev)>>>(
            x.ptr<T>(), positions.ptr<const int32_t>(), inv_freq.ptr<const float>(), int(heads),
            int(half), inverse, amax_out_bits(x_amax));
    });
    loft::cuda::check_launch("rope");
  });
}

}  // namespace loft::ops
