// NF4 kernels. Bit-identity with the CPU rests on: fp32 division and fma written as the
// correctly rounded intrinsics (__fdiv_rn, __fmaf_rn, __fmul_rn: no fast-math or contraction can
// change them), the CPU's threshold tables passed in as a kernel parameter, and "number of
// thresholds strictly below v" as the code on both sides. Max reductions are exact in any order.
#include <cmath>

#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/quant/cuda/nf4_cuda.h"
#include "engine/quant/cuda/nf4_tables.cuh"

namespace loft {

using namespace ops::cuda_kernels;

namespace {

// The number of entries of the ascending table t[0..n) strictly below v (binary search).
__device__ __forceinline__ int count_below(const float* t, int n, float v) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (t[mid] < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// max that keeps a NaN, so the host sees a NaN absmax and names the block.
__device__ __forceinline__ float nan_max(float a, float b) { return (a != a || a > b) ? a : b; }

constexpr int kWarpsPerCta = 8;

// Level 1: one warp per block of 64; lane t owns elements 2t and 2t+1, i.e. byte t of the block.
template <typename T>
__global__ void quantize_blocks_kernel(const T* __restrict__ x, int64_t n, int64_t n_blocks,
                                       uint8_t* __restrict__ codes, float* __restrict__ absmax,
                                       const __grid_constant__ Nf4Tables tab) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerCta;
  for (int64_t b = int64_t(blockIdx.x) * kWarpsPerCta + (threadIdx.x >> 5); b < n_blocks;
       b += warps) {
    const int64_t i0 = b * kNf4BlockSize + 2 * lane, i1 = i0 + 1;
    const float x0 = i0 < n ? to_f32(x[i0]) : 0.0f;
    const float x1 = i1 < n ? to_f32(x[i1]) : 0.0f;
    float m = nan_max(fabsf(x0), fabsf(x1));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = nan_max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (i0 < n) {
      const int c0 = m == 0.0f ? kNf4ZeroCode : count_below(tab.level_thresholds, 15, __fdiv_rn(x0, m));
      const int c1 = i1 >= n       ? kNf4PadCode
                     : m == 0.0f ? kNf4ZeroCode
                                 : count_below(tab.level_thresholds, 15, __fdiv_rn(x1, m));
      codes[i0 / 2] = uint8_t((c0 << 4) | c1);
    }
    if (lane == 0) absmax[b] = m;
  }
}

// Level 2: one CTA of 256 threads per group of 256 block absmaxes.
__global__ void quantize_absmax_kernel(const float* __restrict__ absmax, int64_t n_blocks,
                                       float offset, int zero_code,
                                       uint8_t* __restrict__ absmax_codes,
                                       float* __restrict__ scales,
                                       const __grid_constant__ Nf4Tables tab) {
  __shared__ float warp_max[kNf4AbsmaxGroup / 32];
  const int64_t b = int64_t(blockIdx.x) * kNf4AbsmaxGroup + threadIdx.x;
  const float d = b < n_blocks ? __fsub_rn(absmax[b], offset) : 0.0f;
  float m = fabsf(d);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  float s = 0.0f;
#pragma unroll
  for (int w = 0; w < kNf4AbsmaxGroup / 32; ++w) s = fmaxf(s, warp_max[w]);
  if (threadIdx.x == 0) scales[blockIdx.x] = s;
  if (b < n_blocks)
    absmax_codes[b] =
        uint8_t(s == 0.0f ? zero_code : count_below(tab.map_thresholds, 255, __fdiv_rn(d, s)));
}

// Both levels decoded and the weight written: each thread owns 8 consecutive elements (4 code
// bytes, all in one block of 64), stored as one chunk when aligned.
template <typename T>
__global__ void dequantize_kernel(const uint8_t* __restrict__ codes,
                                  const uint8_t* __restrict__ absmax_codes,
                                  const float* __restrict__ scales, float offset, int64_t n,
                                  T* __restrict__ out, const __grid_constant__ Nf4Tables tab) {
  __shared__ float levels[16], map[256];
  for (int k = threadIdx.x; k < 256; k += blockDim.x) map[k] = tab.map[k];
  if (threadIdx.x < 16) levels[threadIdx.x] = tab.levels[threadIdx.x];
  __syncthreads();
  const bool vec = aligned16(out) && (reinterpret_cast<uintptr_t>(codes) & 3u) == 0;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks; c += stride) {
    const int64_t e0 = c * kChunk, blk = e0 / kNf4BlockSize;
    const float a = __fmaf_rn(map[absmax_codes[blk]], scales[blk / kNf4AbsmaxGroup], offset);
    if (vec && e0 + kChunk <= n) {
      const uint32_t u = reinterpret_cast<const uint32_t*>(codes)[c];
      float v[kChunk];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint32_t byte = (u >> (8 * k)) & 0xffu;
        v[2 * k] = __fmul_rn(levels[byte >> 4], a);
        v[2 * k + 1] = __fmul_rn(levels[byte & 15u], a);
      }
      store_chunk<T>(out + e0, v);
    } else {
      for (int64_t e = e0; e < n && e < e0 + kChunk; ++e) {
        const uint8_t byte = codes[e / 2];
        const int code = (e % 2 == 0) ? (byte >> 4) : (byte & 15);
        out[e] = from_f32<T>(__fmul_rn(levels[code], a));
      }
    }
  }
}

}  // namespace

Nf4Tensor quantize_nf4_cuda(const Tensor& w) {
  const int dev = use_device(w);
  const Device device = w.device();
  const int64_t n = w.numel(), nb = nf4_block_count(n), ng = nf4_group_count(n);
  Nf4Tensor q;
  q.shape = w.shape();
  q.codes = Tensor::empty({(n + 1) / 2}, DType::U8, device);
  q.absmax_codes = Tensor::empty({nb}, DType::U8, device);
  q.absmax_scale = Tensor::empty({ng}, DType::F32, device);
  Tensor absmax = Tensor::empty({nb}, DType::F32, device);
  const cudaStream_t st = cuda::stream(dev);
  dispatch_activation(w.dtype(), "quantize_nf4", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int threads = 32 * kWarpsPerCta;
    const unsigned grid = grid_for((nb + kWarpsPerCta - 1) / kWarpsPerCta * threads, threads, dev);
    quantize_blocks_kernel<T><<<grid, threads, 0, st>>>(w.ptr<T>(), n, nb, q.codes.ptr<uint8_t>(),
                                                        absmax.ptr<float>(), nf4_device_tables());
    cuda::check_launch("quantize_nf4 (blocks)");
  });
  const std::vector<float> host_absmax = absmax.to_float_vector();
  for (int64_t b = 0; b < nb; ++b)
    if (!std::isfinite(host_absmax[size_t(b)]))
      throw Error(cat("quantize_nf4: tensor ", w.str(), " holds a NaN or Inf in block ", b,
                      " (elements ", b * kNf4BlockSize, "..",
                      std::min(n, (b + 1) * kNf4BlockSize) - 1, ")"));
  q.absmax_offset = nf4_absmax_mean(host_absmax.data(), nb);
  quantize_absmax_kernel<<<unsigned(ng), unsigned(kNf4AbsmaxGroup), 0, st>>>(
      absmax.ptr<float>(), nb, q.absmax_offset, dynamic_map_code(0.0f),
      q.absmax_codes.ptr<uint8_t>(), q.absmax_scale.ptr<float>(), nf4_device_tables());
  cuda::check_launch("quantize_nf4 (absmax)");
  return q;
}

void dequantize_nf4_cuda(const Nf4Tensor& q, Tensor& out) {
  const int dev = use_device(out);
  const int64_t n = q.numel();
  dispatch_activation(out.dtype(), "dequantize_nf4", [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int kThreads = 256;
    dequantize_kernel<T><<<grid_for((n + kChunk - 1) / kChunk, kThreads, dev), kThreads, 0,
                           cuda::stream(dev)>>>(
        q.codes.ptr<uint8_t>(), q.absmax_codes.ptr<uint8_t>(), q.absmax_scale.ptr<float>(),
        q.absmax_offset, n, out.ptr<T>(), nf4_device_tables());
    cuda::check_launch("dequantize_nf4");
  });
}

}  // namespace loft
