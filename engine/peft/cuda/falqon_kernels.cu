// FALQON's kernels: the scaled E4M3 encode of A, the split of the melded GEMM's output, and the
// after-step row update (scores, top-k select, code update, buffer bookkeeping). Each mirrors its
// CPU reference in engine/peft/falqon_ops.cpp operation for operation (__fmaf_rn for std::fma,
// __fdiv_rn / __fmul_rn for the IEEE division and product), so the results are bit-identical.
#include <cuda_fp8.h>

#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/peft/cuda/falqon_cuda.h"
#include "engine/quant/fp8.h"

namespace loft::falqon::cuda {

namespace {

using namespace loft::ops::cuda_kernels;

constexpr int kThreads = 256;

__device__ __forceinline__ float decode_e4m3(uint8_t c) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(c, __NV_E4M3)));  // exact: fp8 ⊂ fp16
}

__global__ void encode_kernel(const float* __restrict__ x, int64_t n, const float* __restrict__ scale,
                              uint8_t* __restrict__ codes) {
  const float s = *scale;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    codes[i] = quant::f32_to_fp8_e4m3(__fdiv_rn(x[i], s));
}

template <typename T>
__global__ void split_kernel(const T* __restrict__ full, int64_t rows, int64_t out, int64_t r,
                             T* __restrict__ head, T* __restrict__ tail) {
  const int64_t w = out + r, n = rows * w;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int64_t i = e / w, c = e - i * w;
    if (c < out)
      head[i * out + c] = full[e];
    else
      tail[i * r + (c - out)] = full[e];
  }
}

// One thread per row, summing in column order as the CPU does.
__global__ void scores_kernel(const float* __restrict__ b, int64_t out, int64_t r,
                              float* __restrict__ scores) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < out; i += stride) {
    float s = 0.0f;
    for (int64_t j = 0; j < r; ++j) s = __fadd_rn(s, fabsf(b[i * r + j]));
    scores[i] = s;
  }
}

// Exclusive prefix sum of v over the block (blockDim.x a multiple of 32); *total gets the sum.
// `warp_sums`: 32 ints of shared memory.
__device__ int block_exclusive_scan(int v, int* total, int* warp_sums) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = int(blockDim.x >> 5);
  int x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) warp_sums[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int w = lane < warps ? warp_sums[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += y;
    }
    warp_sums[lane] = w;  // inclusive over warps
  }
  __syncthreads();
  const int before = warp > 0 ? warp_sums[warp - 1] : 0;
  *total = warp_sums[warps - 1];
  __syncthreads();  // warp_sums is reused by the next call
  return before + x - v;
}

constexpr int kSelectThreads = 1024;

// Scores are >= 0 (or NaN), so their bit patterns order like the values: the k-th largest key is
// found 8 bits at a time from the top (a histogram of the keys matching the prefix so far).
__global__ void select_kernel(const float* __restrict__ scores, int n, int k, int* __restrict__ idx) {
  __shared__ unsigned hist[256];
  __shared__ unsigned s_prefix, s_remaining;
  __shared__ int warp_sums[32];
  const int tid = threadIdx.x;
  unsigned prefix = 0, mask = 0, remaining = unsigned(k);
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = tid; b < 256; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    for (int i = tid; i < n; i += blockDim.x) {
      const unsigned key = __float_as_uint(scores[i]);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (tid == 0) {
      unsigned above = 0;
      int b = 255;
      for (; b > 0; --b) {
        if (above + hist[b] >= remaining) break;
        above += hist[b];
      }
      s_prefix = prefix | (unsigned(b) << shift);
      s_remaining = remaining - above;
    }
    __syncthreads();
    prefix = s_prefix;
    remaining = s_remaining;
    mask |= 255u << shift;
    __syncthreads();
  }
  // prefix is the k-th largest key; take every larger key and the `remaining` lowest-index ties.
  int base_eq = 0, base_sel = 0;
  for (int start = 0; start < n; start += blockDim.x) {
    const int i = start + tid;
    const unsigned key = i < n ? __float_as_uint(scores[i]) : 0u;
    const bool eq = i < n && key == prefix;
    int eq_total = 0, sel_total = 0;
    const int eq_rank = base_eq + block_exclusive_scan(eq ? 1 : 0, &eq_total, warp_sums);
    const bool sel = i < n && (key > prefix || (eq && unsigned(eq_rank) < remaining));
    const int pos = base_sel + block_exclusive_scan(sel ? 1 : 0, &sel_total, warp_sums);
    if (sel) idx[pos] = i;
    base_eq += eq_total;
    base_sel += sel_total;
  }
}

// grid (column blocks, k rows): one thread per element of a selected row.
__global__ void update_kernel(const int* __restrict__ idx, const float* __restrict__ b, int64_t out,
                              int64_t r, int64_t in, const float* __restrict__ scale,
                              uint8_t* __restrict__ wm, uint8_t* __restrict__ wt,
                              uint8_t* __restrict__ changed) {
  extern __shared__ float brow[];
  const int64_t i = idx[blockIdx.y];
  for (int64_t c = threadIdx.x; c < r; c += blockDim.x) brow[c] = b[i * r + c];
  __syncthreads();
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= in) return;
  const float s = *scale, lim = __fmul_rn(448.0f, s);
  const uint8_t* a = wm + out * in;
  float acc = 0.0f;
  for (int64_t c = 0; c < r; ++c) acc = __fmaf_rn(brow[c], __fmul_rn(decode_e4m3(a[c * in + j]), s), acc);
  const uint8_t old = wm[i * in + j];
  const float w = fminf(fmaxf(__fmaf_rn(decode_e4m3(old), s, acc), -lim), lim);
  const uint8_t code = quant::f32_to_fp8_e4m3(__fdiv_rn(w, s));
  if (code != old && (code | old) != 0x80) {  // ±0 swaps are no change (as the CPU)
    changed[i] = 1;
    wm[i * in + j] = code;
    wt[j * out + i] = code;
  }
}

__global__ void buffer_kernel(const int* __restrict__ idx, int64_t k, int64_t r, float* __restrict__ b,
                              float* __restrict__ applied, bool zero_rows) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < k * r; t += stride) {
    const int64_t e = int64_t(idx[t / r]) * r + t % r;
    applied[e] = __fadd_rn(applied[e], b[e]);
    if (zero_rows) b[e] = 0.0f;
  }
}

}  // namespace

void encode_e4m3(const Tensor& x, const Tensor& scale, Tensor& codes) {
  const int dev = use_device(x);
  const int64_t n = x.numel();
  if (n == 0) return;
  encode_kernel<<<grid_for(n, kThreads, dev), kThreads, 0, loft::cuda::stream(dev)>>>(
      x.ptr<float>(), n, scale.ptr<float>(), codes.ptr<uint8_t>());
  loft::cuda::check_launch("falqon encode_kernel");
}

void split_columns(const Tensor& full, Tensor& head, Tensor& tail) {
  const int dev = use_device(full);
  const int64_t n = full.numel();
  if (n == 0) return;
  dispatch_activation(full.dtype(), "falqon split_columns", [&](auto tag) {
    using T = typename decltype(tag)::type;
    split_kernel<T><<<grid_for(n, kThreads, dev), kThreads, 0, loft::cuda::stream(dev)>>>(
        full.ptr<T>(), full.size(0), head.size(1), tail.size(1), head.ptr<T>(), tail.ptr<T>());
    loft::cuda::check_launch("falqon split_kernel");
  });
}

void row_scores(const Tensor& b, Tensor& scores) {
  const int dev = use_device(b);
  const int64_t out = b.size(0);
  if (out == 0) return;
  scores_kernel<<<grid_for(out, kThreads, dev), kThreads, 0, loft::cuda::stream(dev)>>>(
      b.ptr<float>(), out, b.size(1), scores.ptr<float>());
  loft::cuda::check_launch("falqon scores_kernel");
}

void select_topk(const Tensor& scores, Tensor& idx) {
  const int dev = use_device(scores);
  LOFT_CHECK(scores.numel() < (int64_t(1) << 31), "falqon select_topk: ", scores.str(),
             " has too many rows");
  select_kernel<<<1, kSelectThreads, 0, loft::cuda::stream(dev)>>>(
      scores.ptr<float>(), int(scores.numel()), int(idx.numel()), idx.ptr<int>());
  loft::cuda::check_launch("falqon select_kernel");
}

void apply_rows(RowUpdate& u, bool zero_all) {
  const int dev = use_device(u.b);
  const int64_t k = u.idx.numel(), out = u.b.size(0), r = u.b.size(1), in = u.wm.size(1);
  cudaStream_t st = loft::cuda::stream(dev);
  if (k > 0 && in > 0) {
    LOFT_CHECK(k <= 65535, "falqon apply_rows: top-k ", k, " exceeds the grid's 65535 rows");
    const dim3 grid(unsigned((in + kThreads - 1) / kThreads), unsigned(k));
    update_kernel<<<grid, kThreads, size_t(r) * sizeof(float), st>>>(
        u.idx.ptr<int>(), u.b.ptr<float>(), out, r, in, u.scale.ptr<float>(), u.wm.ptr<uint8_t>(),
        u.wt.ptr<uint8_t>(), u.changed.ptr<uint8_t>());
    loft::cuda::check_launch("falqon update_kernel");
  }
  if (k > 0 && r > 0) {
    buffer_kernel<<<grid_for(k * r, kThreads, dev), kThreads, 0, st>>>(
        u.idx.ptr<int>(), k, r, u.b.ptr<float>(), u.applied.ptr<float>(), !zero_all);
    loft::cuda::check_launch("falqon buffer_kernel");
  }
  if (zero_all) u.b.zero_();
}

}  // namespace loft::falqon::cuda
