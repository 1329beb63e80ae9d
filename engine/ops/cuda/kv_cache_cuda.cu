// CUDA KV-cache write and cached (decode) attention; see kv_cache_cuda.h.
#include "engine/ops/cuda/kv_cache_cuda.h"
#include "engine/ops/cuda/attention_paths.h"
#include "engine/ops/cuda/kernel_util.cuh"

namespace loft::ops::cuda {

using namespace cuda_kernels;

namespace {

constexpr int kWarps = 4;
constexpr int kMaxPerLane = 8;  // head_dim <= 256

struct CacheDims {
  int64_t slots, max_len;
  int hkv, d;
  __device__ bool holds(int32_t s, int32_t p) const {
    return s >= 0 && s < slots && p >= 0 && p < max_len;
  }
  // Element offset of (slot, pos, kv head 0).
  __device__ int64_t at(int32_t s, int32_t p) const {
    return (int64_t(s) * max_len + p) * hkv * d;
  }
};

template <typename T>
__global__ void write_kernel(const T* k, const T* v, const int32_t* slots, const int32_t* pos,
                             T* kc, T* vc, CacheDims c) {
  const int64_t t = blockIdx.x, row = int64_t(c.hkv) * c.d;
  const int32_t s = slots[t], p = pos[t];
  if (!c.holds(s, p)) return;
  const int64_t at = c.at(s, p);
  for (int64_t e = threadIdx.x; e < row; e += blockDim.x) {
    kc[at + e] = k[t * row + e];
    vc[at + e] = v[t * row + e];
  }
}

// Block b serves token b / hq, query head b % hq. scale_log2 = scale · log2(e): exp2 below.
template <typename T>
__global__ void __launch_bounds__(kWarps * 32)
    attend_kernel(const T* q, const T* kc, const T* vc, const int32_t* slots, const int32_t* pos,
                  T* out, int hq, CacheDims c, float scale_log2, int window) {
  extern __shared__ float s_acc[];  // [kWarps][d]
  __shared__ float s_m[kWarps], s_l[kWarps];
  const int64_t t = blockIdx.x / hq;
  const int h = int(blockIdx.x % hq), d = c.d;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int per = (d + 31) / 32, e0 = lane * per;
  const int32_t s = slots[t], p = pos[t];
  const int n = c.holds(s, p) ? p + 1 : 0;
  const int kh = h / (hq / c.hkv);
  const T* qt = q + (t * hq + h) * d;
  float qv[kMaxPerLane], acc[kMaxPerLane];
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    qv[i] = (i < per && e0 + i < d) ? to_f32(qt[e0 + i]) : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int64_t stride = int64_t(c.hkv) * d;
  const int64_t base = n > 0 ? c.at(s, 0) + int64_t(kh) * d : 0;
  const int first = window > 0 ? max(0, p - window + 1) : 0;  // a sliding window's oldest key
  for (int j = first + warp; j < n; j += kWarps) {
    const T* kj = kc + base + j * stride;
    float sc = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i)
      if (i < per && e0 + i < d) sc += qv[i] * to_f32(kj[e0 + i]);
    sc = warp_sum(sc) * scale_log2;
    const float m_new = fmaxf(m, sc);
    const float corr = exp2f(m - m_new), w = exp2f(sc - m_new);
    l = l * corr + w;
    const T* vj = vc + base + j * stride;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i)
      if (i < per && e0 + i < d) acc[i] = acc[i] * corr + w * to_f32(vj[e0 + i]);
    m = m_new;
  }
  if (lane == 0) s_m[warp] = m, s_l[warp] = l;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i)
    if (i < per && e0 + i < d) s_acc[warp * d + e0 + i] = acc[i];
  __syncthreads();
  float mx = -INFINITY, sum = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_m[w]);
#pragma unroll
  for (int w = 0; w < kWarps; ++w)
    if (s_l[w] > 0.0f) sum += s_l[w] * exp2f(s_m[w] - mx);
  T* ot = out + (t * hq + h) * d;
  for (int e = threadIdx.x; e < d; e += blockDim.x) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      if (s_l[w] > 0.0f) o += s_acc[w * d + e] * exp2f(s_m[w] - mx);
    ot[e] = from_f32<T>(sum > 0.0f ? o / sum : 0.0f);
  }
}

// (value, id) a comes before b: a total order whose first element is the sequential argmax.
__device__ __forceinline__ bool before(float av, int ai, float bv, int bi) {
  const bool an = isnan(av), bn = isnan(bv);
  if (an != bn) return bn;
  if (!an && av != bv) return av > bv;
  return ai < bi;
}

constexpr int kArgmaxThreads = 256;

__global__ void __launch_bounds__(kArgmaxThreads) argmax_kernel(const float* x, int64_t n, int32_t* out) {
  __shared__ float s_v[kArgmaxThreads / 32];
  __shared__ int s_i[kArgmaxThreads / 32];
  const float* row = x + int64_t(blockIdx.x) * n;
  float bv = NAN;
  int bi = INT32_MAX;
  for (int64_t i = threadIdx.x; i < n; i += kArgmaxThreads)
    if (before(row[i], int(i), bv, bi)) bv = row[i], bi = int(i);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(~0u, bv, o);
    const int oi = __shfl_xor_sync(~0u, bi, o);
    if (before(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) s_v[warp] = bv, s_i[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kArgmaxThreads / 32; ++w)
      if (before(s_v[w], s_i[w], bv, bi)) bv = s_v[w], bi = s_i[w];
    out[blockIdx.x] = bi;
  }
}

CacheDims dims_of(const Tensor& cache) {
  return {cache.size(0), cache.size(1), int(cache.size(2)), int(cache.size(3))};
}

}  // namespace

void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, const Tensor& pos,
                    Tensor& k_cache, Tensor& v_cache) {
  const int dev = use_device(k);
  const int64_t tokens = k.size(0);
  LOFT_CHECK(tokens <= INT32_MAX, "kv_cache_write: ", tokens, " tokens are too many for a launch");
  const CacheDims c = dims_of(k_cache);
  const int threads = int(std::clamp<int64_t>((int64_t(c.hkv) * c.d + 31) / 32 * 32, 32, 256));
  dispatch_activation(k.dtype(), "kv_cache_write", [&](auto tag) {
    using T = typename decltype(tag)::type;
    write_kernel<T><<<unsigned(tokens), threads, 0, loft::cuda::stream(dev)>>>(
        k.ptr<const T>(), v.ptr<const T>(), slots.ptr<const int32_t>(), pos.ptr<const int32_t>(),
        k_cache.ptr<T>(), v_cache.ptr<T>(), c);
    loft::cuda::check_launch("kv_cache_write");
  });
}

void cached_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      const Tensor& slots, const Tensor& pos, float scale, Tensor& out,
                      const Tensor* tiles, int64_t window) {
  // The flash and decode kernels read every key from 0: a sliding window takes the general one.
  if (window == 0 && tiles && cuda_attention::flash_cached_supports(q, k_cache, tiles->size(0)))
    return cuda_attention::flash_cached_forward(q, k_cache, v_cache, *tiles, scale, out);
  if (window == 0 && !tiles && decode_attention_supports(q, k_cache))
    return decode_attention(q, k_cache, v_cache, slots, pos, scale, out);
  const int dev = use_device(q);
  const int64_t tokens = q.size(0), hq = q.size(1);
  const CacheDims c = dims_of(k_cache);
  LOFT_CHECK(c.d <= 32 * kMaxPerLane, "cached_attention: head_dim ", c.d, " > ", 32 * kMaxPerLane);
  LOFT_CHECK(tokens * hq <= INT32_MAX && c.max_len <= INT32_MAX, "cached_attention: ", q.str(),
             " too large for one launch");
  const size_t shared = size_t(kWarps) * size_t(c.d) * sizeof(float);
  const float scale_log2 = scale * 1.4426950408889634f;
  dispatch_activation(q.dtype(), "cached_attention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    attend_kernel<T><<<unsigned(tokens * hq), kWarps * 32, shared, loft::cuda::stream(dev)>>>(
        q.ptr<const T>(), k_cache.ptr<const T>(), v_cache.ptr<const T>(),
        slots.ptr<const int32_t>(), pos.ptr<const int32_t>(), out.ptr<T>(), int(hq), c,
        scale_log2, int(window));
    loft::cuda::check_launch("cached_attention");
  });
}

void argmax_rows(const Tensor& x, Tensor& out) {
  const int dev = use_device(x);
  LOFT_CHECK(x.size(0) <= INT32_MAX && x.size(1) <= INT32_MAX, "argmax_rows: ", x.str(), " too large for one launch");
  argmax_kernel<<<unsigned(x.size(0)), kArgmaxThreads, 0, loft::cuda::stream(dev)>>>(x.ptr<float>(), x.size(1),
                                                                             out.ptr<int32_t>());
  loft::cuda::check_launch("argmax_rows");
}

}  // namespace loft::ops::cuda
