// Per-head RMSNorm then RoPE (Qwen3's q/k norms), forward and backward, one pass over q or k.
// One block per token: its cos/sin table (rope_angles.cuh, as rope.cu builds it) goes to shared
// memory once, then each warp takes whole heads. A lane holds rotation pairs (i, i + head_dim/2)
// for i = lane, lane + 32, ..., so the rotation never crosses lanes; the row's sums are warp
// shuffles in fp32. A row is read twice (its sum, then the values), the second time from L1.
// Where head_dim/16 is a power of two and the tensors 16-byte aligned (every Llama-family head
// size), the chunked kernels below read each row once in 16-byte pieces instead: at qwen3-8b the
// per-element ones ran at 1.4-1.7 TB/s.
// Separately, rmsnorm's one block per 128-wide row and rope's pass over its output had cost four
// passes and ~2% of a Qwen3-8B step (docs/perf-journal.md).
#include <algorithm>
#include <initializer_list>

#include "engine/ops/ops.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/rope_angles.cuh"

namespace loft::ops {

using namespace cuda_kernels;

namespace {

constexpr int kWarps = 8;

// The pair (a, b) at rotation index i turned by the token's table (the inverse table turns it
// back), each rounded to T as a stored result would be.
template <typename T>
__device__ __forceinline__ float2 rotate_pair(float a, float b, const float* table, int i, int half) {
  const float c = table[i], s = table[half + i];
  return make_float2(round_to<T>(a * c - b * s), round_to<T>(b * c + a * s));
}

template <typename T, typename TW>
__global__ void head_norm_rope_kernel(const T* x, const TW* w, const int32_t* positions,
                                      const float* inv_freq, T* y, float* rstd, int heads, int half,
                                      float eps) {
  extern __shared__ float table[];
  const int64_t t = blockIdx.x;
  rope_angles(table, positions[t], inv_freq, half, false);
  const int lane = threadIdx.x & 31, d = 2 * half;
  for (int h = threadIdx.x >> 5; h < heads; h += kWarps) {
    const int64_t row = t * heads + h;
    const T* xr = x + row * d;
    T* yr = y + row * d;
    float ss = 0.0f;
    for (int j = lane; j < d; j += 32) {
      const float v = to_f32(xr[j]);
      ss = fmaf(v, v, ss);
    }
    const float rs = rsqrtf(warp_sum(ss) / float(d) + eps);
    if (rstd && lane == 0) rstd[row] = rs;
    for (int i = lane; i < half; i += 32) {
      const float a = round_to<T>(to_f32(w[i]) * (to_f32(xr[i]) * rs));
      const float b = round_to<T>(to_f32(w[i + half]) * (to_f32(xr[i + half]) * rs));
      const float2 r = rotate_pair<T>(a, b, table, i, half);
      yr[i] = from_f32<T>(r.x);
      yr[i + half] = from_f32<T>(r.y);
    }
  }
}

// g = dy rotated back (rounded to T), then dx = rs·w⊙g − rs³·x·mean(x⊙w⊙g). Each lane reads and
// writes only its own pairs, after the row's dot is reduced: dx may alias dy. kAmax: amax takes
// max |dx| (ops.h: dx_amax).
template <typename T, typename TW, bool kAmax>
__global__ void head_norm_rope_backward_kernel(const T* dy, const T* x, const TW* w,
                                               const float* rstd, const int32_t* positions,
                                               const float* inv_freq, T* dx, int heads, int half,
                                               unsigned* amax) {
  extern __shared__ float table[];
  const int64_t t = blockIdx.x;
  rope_angles(table, positions[t], inv_freq, half, true);
  const int lane = threadIdx.x & 31, d = 2 * half;
  float m = 0.0f;
  for (int h = threadIdx.x >> 5; h < heads; h += kWarps) {
    const int64_t row = t * heads + h;
    const T* dyr = dy + row * d;
    const T* xr = x + row * d;
    T* dxr = dx + row * d;
    float dot = 0.0f;
    for (int i = lane; i < half; i += 32) {
      const float2 g = rotate_pair<T>(to_f32(dyr[i]), to_f32(dyr[i + half]), table, i, half);
      dot = fmaf(to_f32(xr[i]) * to_f32(w[i]), g.x, dot);
      dot = fmaf(to_f32(xr[i + half]) * to_f32(w[i + half]), g.y, dot);
    }
    const float rs = rstd[row];
    const float k3 = rs * rs * rs * warp_sum(dot) / float(d);
    for (int i = lane; i < half; i += 32) {
      const float2 g = rotate_pair<T>(to_f32(dyr[i]), to_f32(dyr[i + half]), table, i, half);
      const float xa = to_f32(xr[i]), xb = to_f32(xr[i + half]);
      const float lo = rs * to_f32(w[i]) * g.x - k3 * xa, hi = rs * to_f32(w[i + half]) * g.y - k3 * xb;
      dxr[i] = from_f32<T>(lo);
      dxr[i + half] = from_f32<T>(hi);
      if constexpr (kAmax) m = fmaxf(m, fmaxf(fabsf(lo), fabsf(hi)));
    }
  }
  if constexpr (kAmax) warp_amax(stored_abs_max<T>(m), amax);
}

// The same two kernels with each head's row split over `lanes` = half/kChunk lanes (a power of
// two up to 32), each holding kChunk consecutive pairs through 16-byte loads and stores of both
// halves, so a warp takes 32/lanes heads at once; the row's sums are shuffles within the group.
// Used where the rows allow it (chunked_ok); the per-element expressions are the kernels' above.

// v summed over each aligned group of `lanes` lanes (a power of two up to 32), on every lane of the
// group. Every lane of the warp must call it.
__device__ __forceinline__ float group_sum(float v, int lanes) {
  for (int o = lanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T, typename TW>
__global__ void head_norm_rope_chunked_kernel(const T* x, const TW* w, const int32_t* positions,
                                              const float* inv_freq, T* y, float* rstd, int heads,
                                              int half, float eps) {
  extern __shared__ float table[];
  const int64_t t = blockIdx.x;
  rope_angles(table, positions[t], inv_freq, half, false);
  const int lanes = half / kChunk, lane = threadIdx.x & 31, i0 = (lane & (lanes - 1)) * kChunk;
  const int per_warp = 32 / lanes, d = 2 * half;
  for (int h0 = (threadIdx.x >> 5) * per_warp; h0 < heads; h0 += (blockDim.x >> 5) * per_warp) {
    const int h = h0 + lane / lanes;  // the loop is warp-uniform: every lane reaches the shuffles
    const int64_t row = t * heads + h;
    float a[kChunk], b[kChunk], ss = 0.0f;
    if (h < heads) {
      load_chunk(x + row * d + i0, a);
      load_chunk(x + row * d + i0 + half, b);
#pragma unroll
      for (int e = 0; e < kChunk; ++e) ss = fmaf(b[e], b[e], fmaf(a[e], a[e], ss));
    }
    ss = group_sum(ss, lanes);
    if (h >= heads) continue;
    const float rs = rsqrtf(ss / float(d) + eps);
    if (rstd && i0 == 0) rstd[row] = rs;
    float wa[kChunk], wb[kChunk], lo[kChunk], hi[kChunk];
    load_chunk(w + i0, wa);
    load_chunk(w + i0 + half, wb);
#pragma unroll
    for (int e = 0; e < kChunk; ++e) {
      const float2 r = rotate_pair<T>(round_to<T>(wa[e] * (a[e] * rs)), round_to<T>(wb[e] * (b[e] * rs)),
                                      table, i0 + e, half);
      lo[e] = r.x;
      hi[e] = r.y;
    }
    store_chunk(y + row * d + i0, lo);
    store_chunk(y + row * d + i0 + half, hi);
  }
}

template <typename T, typename TW, bool kAmax>
__global__ void head_norm_rope_backward_chunked_kernel(const T* dy, const T* x, const TW* w,
                                                       const float* rstd, const int32_t* positions,
                                                       const float* inv_freq, T* dx, int heads, int half,
                                                       unsigned* amax) {
  extern __shared__ float table[];
  const int64_t t = blockIdx.x;
  rope_angles(table, positions[t], inv_freq, half, true);
  const int lanes = half / kChunk, lane = threadIdx.x & 31, i0 = (lane & (lanes - 1)) * kChunk;
  const int per_warp = 32 / lanes, d = 2 * half;
  float m = 0.0f;
  for (int h0 = (threadIdx.x >> 5) * per_warp; h0 < heads; h0 += (blockDim.x >> 5) * per_warp) {
    const int h = h0 + lane / lanes;
    const int64_t row = t * heads + h;
    float ga[kChunk], gb[kChunk], xa[kChunk], xb[kChunk], wa[kChunk], wb[kChunk], dot = 0.0f;
    if (h < heads) {
      load_chunk(dy + row * d + i0, ga);
      load_chunk(dy + row * d + i0 + half, gb);
      load_chunk(x + row * d + i0, xa);
      load_chunk(x + row * d + i0 + half, xb);
      load_chunk(w + i0, wa);
      load_chunk(w + i0 + half, wb);
#pragma unroll
      for (int e = 0; e < kChunk; ++e) {
        const float2 g = rotate_pair<T>(ga[e], gb[e], table, i0 + e, half);
        ga[e] = g.x;
        gb[e] = g.y;
        dot = fmaf(xa[e] * wa[e], g.x, dot);
        dot = fmaf(xb[e] * wb[e], g.y, dot);
      }
    }
    dot = group_sum(dot, lanes);
    if (h >= heads) continue;
    // This lane's dy chunks are all read above: dx may alias dy.
    const float rs = rstd[row];
    const float k3 = rs * rs * rs * dot / float(d);
#pragma unroll
    for (int e = 0; e < kChunk; ++e) {
      ga[e] = rs * wa[e] * ga[e] - k3 * xa[e];
      gb[e] = rs * wb[e] * gb[e] - k3 * xb[e];
      if constexpr (kAmax) m = fmaxf(m, fmaxf(fabsf(ga[e]), fabsf(gb[e])));
    }
    store_chunk(dx + row * d + i0, ga);
    store_chunk(dx + row * d + i0 + half, gb);
  }
  if constexpr (kAmax) warp_amax(stored_abs_max<T>(m), amax);
}

// A head's row splits into lanes of kChunk pairs when half is kChunk times a power of two up to
// 32 and every tensor the kernel reads or writes by chunks starts 16-byte aligned (rows of
// 2·half elements then do too).
bool chunked_ok(int half, std::initializer_list<const void*> pointers) {
  const int lanes = half / kChunk;
  if (half % kChunk != 0 || lanes > 32 || (lanes & (lanes - 1)) != 0) return false;
  for (const void* p : pointers)
    if (!aligned16(p)) return false;
  return true;
}

// Warps of the chunked kernels' block: enough for every head at once, at most kWarps.
int chunked_threads(int heads, int half) {
  const int64_t lanes = int64_t(heads) * (half / kChunk);
  return int(std::clamp<int64_t>((lanes + 31) / 32, 1, kWarps)) * 32;
}

struct Launch {
  unsigned tokens;
  int heads, half;
  size_t shared;
  cudaStream_t stream;
};

Launch launch_of(const char* op, const Tensor& x, int dev) {
  const int64_t tokens = x.size(0), heads = x.size(1), half = x.size(2) / 2;
  LOFT_CHECK(tokens <= INT32_MAX && heads <= INT32_MAX && x.size(2) <= INT32_MAX, op, ": ", x.str(),
             " too large for one launch");
  const size_t shared = size_t(2 * half) * sizeof(float);
  LOFT_CHECK(shared <= 48 * 1024, op, ": head_dim ", 2 * half, " too large");
  return {unsigned(tokens), int(heads), int(half), shared, loft::cuda::stream(dev)};
}

}  // namespace

void cuda::head_norm_rope(const Tensor& x, const Tensor& weight, float eps,
                          const Tensor& positions, const Tensor& inv_freq, Tensor& y,
                          Tensor* rstd) {
  const int dev = use_device(x);
  if (x.numel() == 0) return;
  const Launch l = launch_of("head_norm_rope", x, dev);
  float* rstd_ptr = rstd ? rstd->ptr<float>() : nullptr;
  dispatch_activation(x.dtype(), "head_norm_rope", [&](auto xt) {
    using T = typename decltype(xt)::type;
    dispatch_activation(weight.dtype(), "head_norm_rope", [&](auto wt) {
      using TW = typename decltype(wt)::type;
      if (chunked_ok(l.half, {x.data(), y.data(), weight.data()}))
        head_norm_rope_chunked_kernel<T, TW><<<l.tokens, chunked_threads(l.heads, l.half), l.shared, l.stream>>>(
            x.ptr<const T>(), weight.ptr<const TW>(), positions.ptr<const int32_t>(),
            inv_freq.ptr<const float>(), y.ptr<T>(), rstd_ptr, l.heads, l.half, eps);
      else
        head_norm_rope_kernel<T, TW><<<l.tokens, kWarps * 32, l.shared, l.stream>>>(
            x.ptr<const T>(), weight.ptr<const TW>(), positions.ptr<const int32_t>(),
            inv_freq.ptr<const float>(), y.ptr<T>(), rstd_ptr, l.heads, l.half, eps);
      loft::cuda::check_launch("head_norm_rope");
    });
  });
}

void cuda::head_norm_rope_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                   const Tensor& rstd, const Tensor& positions,
                                   const Tensor& inv_freq, Tensor& dx, Tensor* dx_amax) {
  const int dev = use_device(x);
  if (x.numel() == 0) return;
  const Launch l = launch_of("head_norm_rope_backward", x, dev);
  dispatch_activation(x.dtype(), "head_norm_rope_backward", [&](auto xt) {
    using T = typename decltype(xt)::type;
    dispatch_activation(weight.dtype(), "head_norm_rope_backward", [&](auto wt) {
      using TW = typename decltype(wt)::type;
      const bool chunked = chunked_ok(l.half, {dy.data(), x.data(), weight.data(), dx.data()});
      with_flags(chunked, dx_amax != nullptr, [&](auto chunks, auto with_amax) {
        constexpr bool kAmax = decltype(with_amax)::value;
        if constexpr (decltype(chunks)::value)
          head_norm_rope_backward_chunked_kernel<T, TW, kAmax>
              <<<l.tokens, chunked_threads(l.heads, l.half), l.shared, l.stream>>>(
                  dy.ptr<const T>(), x.ptr<const T>(), weight.ptr<const TW>(), rstd.ptr<const float>(),
                  positions.ptr<const int32_t>(), inv_freq.ptr<const float>(), dx.ptr<T>(), l.heads,
                  l.half, amax_out_bits(dx_amax));
        else
          head_norm_rope_backward_kernel<T, TW, kAmax><<<l.tokens, kWarps * 32, l.shared, l.stream>>>(
              dy.ptr<const T>(), x.ptr<const T>(), weight.ptr<const TW>(), rstd.ptr<const float>(),
              positions.ptr<const int32_t>(), inv_freq.ptr<const float>(), dx.ptr<T>(), l.heads,
              l.half, amax_out_bits(dx_amax));
      });
      loft::cuda::check_launch("head_norm_rope_backward");
    });
  });
}

}  // namespace loft::ops
