// RMSNorm forward and backward, and their fused residual-add forms (add_rmsnorm,
// rmsnorm_backward_add): one block per row, fp32 sums reduced with warp shuffles. The weight
// gradient is reduced over rows by a separate column-tiled kernel (one atomicAdd per
// column and row chunk) instead of one atomic per element.
#include "engine/ops/ops.h"
#include "engine/ops/cuda/kernel_util.cuh"

namespace loft::ops {

using namespace cuda_kernels;

namespace {

// A chunk of 8 elements from p: 16-byte loads when p allows, else one at a time. For the residual
// operands, whose alignment must not change the vectorisation (and so summation order) chosen on
// the other pointers.
template <typename T>
__device__ __forceinline__ void load_chunk_any(const T* p, float (&v)[kChunk]) {
  if (aligned16(p)) return load_chunk(p, v);
#pragma unroll
  for (int e = 0; e < kChunk; ++e) v[e] = to_f32(p[e]);
}

// Chunks of 8 a thread keeps in registers between a kernel's two passes. A row's block has a
// quarter as many threads as it has chunks (128 at Llama's 4,096), so each thread issues kKeep
// 16-byte loads before it waits on any: with one chunk a thread (512 threads a row) the kernels
// waited on each load and reached 2.7 TB/s of the H200's ~4. Chunks past kKeep · blockDim (rows
// over 16,384 wide) are read again in the second pass.
constexpr int kKeep = 4;
constexpr int kNormThreads = 512;  // the most a row's block takes (the kernels' launch bound)

// kAdd (add_rmsnorm): x's row first becomes residual + x, rounded to TX as axpy rounds it, and is
// normalised from those stored values; otherwise x is only read. The vectorisation and the
// summation order depend on x, y and w alone, so both forms give the same y and rstd for the same
// stored x. kAmax: amax takes max |y| (ops.h: y_amax); the kernel without it is as it was before
// amaxes.
template <typename TX, typename TW, bool kAdd, bool kAmax>
__global__ void __launch_bounds__(kNormThreads) rmsnorm_kernel(const TX* residual, TX* x, const TW* w, TX* y,
                                                        float* rstd, int64_t d, float eps, unsigned* amax) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  TX* xr = x + row * d;
  TX* yr = y + row * d;
  const TX* rr = kAdd ? residual + row * d : nullptr;
  const bool vec = aligned16(xr) && aligned16(yr) && aligned16(w);
  const int64_t chunks = vec ? d / kChunk : 0;
  const int64_t step = blockDim.x;

  float keep[kKeep][kChunk];
#pragma unroll
  for (int k = 0; k < kKeep; ++k)
    if (threadIdx.x + k * step < chunks) load_chunk(xr + (threadIdx.x + k * step) * kChunk, keep[k]);
  if constexpr (kAdd) {  // every load before the first store, which the compiler cannot move them past
    float a[kKeep][kChunk];
#pragma unroll
    for (int k = 0; k < kKeep; ++k)
      if (threadIdx.x + k * step < chunks) load_chunk_any(rr + (threadIdx.x + k * step) * kChunk, a[k]);
#pragma unroll
    for (int k = 0; k < kKeep; ++k) {
      const int64_t c = threadIdx.x + k * step;
      if (c >= chunks) continue;
#pragma unroll
      for (int e = 0; e < kChunk; ++e) keep[k][e] = round_to<TX>(a[k][e] + keep[k][e]);
      store_chunk(xr + c * kChunk, keep[k]);
    }
  }
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kKeep; ++k)
    if (threadIdx.x + k * step < chunks)
#pragma unroll
      for (int e = 0; e < kChunk; ++e) ss += keep[k][e] * keep[k][e];
  for (int64_t c = threadIdx.x + kKeep * step; c < chunks; c += step) {
    float v[kChunk];
    load_chunk(xr + c * kChunk, v);
    if constexpr (kAdd) {
      float a[kChunk];
      load_chunk_any(rr + c * kChunk, a);
#pragma unroll
      for (int e = 0; e < kChunk; ++e) v[e] = round_to<TX>(a[e] + v[e]);
      store_chunk(xr + c * kChunk, v);
    }
#pragma unroll
    for (int e = 0; e < kChunk; ++e) ss += v[e] * v[e];
  }
  for (int64_t j = chunks * kChunk + threadIdx.x; j < d; j += step) {
    float v = to_f32(xr[j]);
    if constexpr (kAdd) {
      const TX sum = from_f32<TX>(to_f32(rr[j]) + v);
      xr[j] = sum;
      v = to_f32(sum);
    }
    ss += v * v;
  }
  ss = block_sum(ss, scratch);
  const float r = 1.0f / sqrtf(ss / float(d) + eps);
  if (rstd && threadIdx.x == 0) rstd[row] = r;
  float m = 0.0f;  // max |y| of this thread's elements (amax)

  auto normalise = [&](int64_t c, float (&v)[kChunk]) {
    float wv[kChunk];
    load_chunk(w + c * kChunk, wv);
#pragma unroll
    for (int e = 0; e < kChunk; ++e) {
      v[e] = wv[e] * (v[e] * r);
      if constexpr (kAmax) m = fmaxf(m, fabsf(v[e]));
    }
    store_chunk(yr + c * kChunk, v);
  };
#pragma unroll
  for (int k = 0; k < kKeep; ++k)
    if (threadIdx.x + k * step < chunks) normalise(threadIdx.x + k * step, keep[k]);
  for (int64_t c = threadIdx.x + kKeep * step; c < chunks; c += step) {
    float v[kChunk];
    load_chunk(xr + c * kChunk, v);
    normalise(c, v);
  }
  for (int64_t j = chunks * kChunk + threadIdx.x; j < d; j += step) {
    const float v = to_f32(w[j]) * (to_f32(xr[j]) * r);
    yr[j] = from_f32<TX>(v);
    if constexpr (kAmax) m = fmaxf(m, fabsf(v));
  }
  if constexpr (kAmax) warp_amax(stored_abs_max<TX>(m), amax);
}

// dx = r·dy·w − (r³/D)·x·Σ(dy·w·x); kAdd: dx = that rounded to TX, + add (rmsnorm_backward then
// axpy, in one pass). Each element is read before it is written by the same thread, so dx may
// alias dy, x or add. As in the forward, each thread keeps its first kKeep chunks of dy and x in
// registers. kAmax: amax takes max |dx| (ops.h: dx_amax).
template <typename TX, typename TW, bool kAdd, bool kAmax>
__global__ void __launch_bounds__(kNormThreads) rmsnorm_backward_kernel(const TX* dy, const TX* x, const TW* w,
                                                                 const float* rstd, const TX* add, TX* dx,
                                                                 int64_t d, unsigned* amax) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const TX* dyr = dy + row * d;
  const TX* xr = x + row * d;
  const TX* ar = kAdd ? add + row * d : nullptr;
  TX* dxr = dx + row * d;
  const bool vec = aligned16(dyr) && aligned16(xr) && aligned16(dxr) && aligned16(w);
  const int64_t chunks = vec ? d / kChunk : 0;
  const int64_t step = blockDim.x;
  const float r = rstd[row];

  // With add, its kept chunks are read here too: a store of dx in the second pass would keep the
  // compiler from moving the next chunk's read of add before it.
  float keep_g[kKeep][kChunk], keep_v[kKeep][kChunk], keep_a[kAdd ? kKeep : 1][kChunk];
#pragma unroll
  for (int k = 0; k < kKeep; ++k) {
    const int64_t c = threadIdx.x + k * step;
    if (c >= chunks) continue;
    load_chunk(dyr + c * kChunk, keep_g[k]);
    load_chunk(xr + c * kChunk, keep_v[k]);
    if constexpr (kAdd) load_chunk_any(ar + c * kChunk, keep_a[k]);
  }
  float dot = 0.0f;
  auto add_dot = [&](int64_t c, const float (&g)[kChunk], const float (&v)[kChunk]) {
    float wv[kChunk];
    load_chunk(w + c * kChunk, wv);
#pragma unroll
    for (int e = 0; e < kChunk; ++e) dot += g[e] * wv[e] * v[e];
  };
#pragma unroll
  for (int k = 0; k < kKeep; ++k)
    if (threadIdx.x + k * step < chunks) add_dot(threadIdx.x + k * step, keep_g[k], keep_v[k]);
  for (int64_t c = threadIdx.x + kKeep * step; c < chunks; c += step) {
    float g[kChunk], v[kChunk];
    load_chunk(dyr + c * kChunk, g);
    load_chunk(xr + c * kChunk, v);
    add_dot(c, g, v);
  }
  for (int64_t j = chunks * kChunk + threadIdx.x; j < d; j += step)
    dot += to_f32(dyr[j]) * to_f32(w[j]) * to_f32(xr[j]);
  dot = block_sum(dot, scratch);
  const float coef = r * r * r * dot / float(d);
  float m = 0.0f;  // max |dx| of this thread's elements (amax)

  // a: add's chunk c (kAdd).
  auto write_dx = [&](int64_t c, float (&g)[kChunk], const float (&v)[kChunk], const float (&a)[kChunk]) {
    float wv[kChunk];
    load_chunk(w + c * kChunk, wv);
#pragma unroll
    for (int e = 0; e < kChunk; ++e) g[e] = r * g[e] * wv[e] - coef * v[e];
    if constexpr (kAdd) {
#pragma unroll
      for (int e = 0; e < kChunk; ++e) g[e] = round_to<TX>(g[e]) + a[e];
    }
#pragma unroll
    for (int e = 0; e < kChunk; ++e)
      if constexpr (kAmax) m = fmaxf(m, fabsf(g[e]));
    store_chunk(dxr + c * kChunk, g);
  };
#pragma unroll
  for (int k = 0; k < kKeep; ++k)
    if (threadIdx.x + k * step < chunks)
      write_dx(threadIdx.x + k * step, keep_g[k], keep_v[k], keep_a[kAdd ? k : 0]);
  for (int64_t c = threadIdx.x + kKeep * step; c < chunks; c += step) {
    float g[kChunk], v[kChunk], a[kChunk];
    load_chunk(dyr + c * kChunk, g);
    load_chunk(xr + c * kChunk, v);
    if constexpr (kAdd) load_chunk_any(ar + c * kChunk, a);
    write_dx(c, g, v, a);
  }
  for (int64_t j = chunks * kChunk + threadIdx.x; j < d; j += step) {
    const float g = to_f32(dyr[j]), v = to_f32(xr[j]);
    float o = r * g * to_f32(w[j]) - coef * v;
    if constexpr (kAdd) o = round_to<TX>(o) + to_f32(ar[j]);
    dxr[j] = from_f32<TX>(o);
    if constexpr (kAmax) m = fmaxf(m, fabsf(o));
  }
  if constexpr (kAmax) warp_amax(stored_abs_max<TX>(m), amax);
}

// A row's block: a thread for every kKeep chunks (at least a warp, at most kNormThreads).
unsigned norm_threads(int64_t d) {
  return unsigned(row_threads((d + kKeep - 1) / kKeep, kNormThreads));
}

// dweight[j] += Σ_rows dy[row, j]·x[row, j]·rstd[row]. Block (32, 8): 32 columns × a chunk of
// rows; the 8 row lanes are summed in shared memory, then one atomicAdd per column.
constexpr int kColTile = 32, kRowLanes = 8;

template <typename TX>
__global__ void rmsnorm_dweight_kernel(const TX* dy, const TX* x, const float* rstd, float* dw,
                                       int64_t rows, int64_t d, int64_t rows_per_block) {
  __shared__ float part[kRowLanes][kColTile + 1];
  const int64_t col = int64_t(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_block;
  const int64_t r1 = min(rows, r0 + rows_per_block);
  float acc = 0.0f;
  if (col < d)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes)
      acc += to_f32(dy[r * d + col]) * to_f32(x[r * d + col]) * rstd[r];
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < d) {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < kRowLanes; ++k) s += part[k][threadIdx.x];
    atomicAdd(dw + col, s);
  }
}

// rmsnorm, or add_rmsnorm when residual is given.
void launch_rmsnorm(const char* op, const Tensor* residual, const Tensor& x, const Tensor& weight,
                    float eps, Tensor& y, Tensor* rstd, Tensor* y_amax) {
  const int dev = use_device(x);
  const int64_t d = x.size(-1);
  if (x.numel() == 0) return;
  const int64_t rows = x.numel() / d;
  LOFT_CHECK(rows <= INT32_MAX, op, ": too many rows (", rows, ") for one launch");
  float* rstd_ptr = rstd ? rstd->ptr<float>() : nullptr;
  dispatch_activation(x.dtype(), op, [&](auto xt) {
    using TX = typename decltype(xt)::type;
    dispatch_activation(weight.dtype(), op, [&](auto wt) {
      using TW = typename decltype(wt)::type;
      const dim3 grid{unsigned(rows)}, block{norm_threads(d)};
      cudaStream_t stream = loft::cuda::stream(dev);
      const TX* res = residual ? residual->ptr<const TX>() : nullptr;
      auto launch = [&](auto add, auto with_amax) {
        rmsnorm_kernel<TX, TW, decltype(add)::value, decltype(with_amax)::value>
            <<<grid, block, 0, stream>>>(res, x.ptr<TX>(), weight.ptr<const TW>(), y.ptr<TX>(),
                                         rstd_ptr, d, eps, amax_out_bits(y_amax));
      };
      with_flags(residual != nullptr, y_amax != nullptr, launch);
      loft::cuda::check_launch(op);
    });
  });
}

// rmsnorm_backward, or rmsnorm_backward_add when add is given.
void launch_rmsnorm_backward(const char* op, const Tensor& dy, const Tensor& x,
                             const Tensor& weight, const Tensor& rstd, const Tensor* add,
                             Tensor& dx, Tensor* dweight, Tensor* dx_amax) {
  const int dev = use_device(x);
  const int64_t d = x.size(-1);
  if (x.numel() == 0) return;
  const int64_t rows = x.numel() / d;
  LOFT_CHECK(rows <= INT32_MAX, op, ": too many rows (", rows, ") for one launch");
  cudaStream_t stream = loft::cuda::stream(dev);
  dispatch_activation(x.dtype(), op, [&](auto xt) {
    using TX = typename decltype(xt)::type;
    // dweight first: dx may alias dy or x, which it reads.
    if (dweight) {
      const int64_t col_blocks = (d + kColTile - 1) / kColTile;
      const int64_t max_row_blocks = std::min<int64_t>((rows + kRowLanes - 1) / kRowLanes, 65535);
      const int64_t want = (int64_t(sm_count(dev)) * 8 + col_blocks - 1) / col_blocks;
      const int64_t row_blocks = std::clamp<int64_t>(want, 1, max_row_blocks);
      const int64_t rows_per_block = (rows + row_blocks - 1) / row_blocks;
      const dim3 grid(unsigned(col_blocks), unsigned((rows + rows_per_block - 1) / rows_per_block));
      rmsnorm_dweight_kernel<TX><<<grid, dim3(kColTile, kRowLanes), 0, stream>>>(
          dy.ptr<const TX>(), x.ptr<const TX>(), rstd.ptr<const float>(), dweight->ptr<float>(),
          rows, d, rows_per_block);
      loft::cuda::check_launch("rmsnorm_dweight");
    }
    dispatch_activation(weight.dtype(), op, [&](auto wt) {
      using TW = typename decltype(wt)::type;
      const dim3 grid{unsigned(rows)}, block{norm_threads(d)};
      const TX* add_ptr = add ? add->ptr<const TX>() : nullptr;
      auto launch = [&](auto with_add, auto with_amax) {
        rmsnorm_backward_kernel<TX, TW, decltype(with_add)::value, decltype(with_amax)::value>
            <<<grid, block, 0, stream>>>(dy.ptr<const TX>(), x.ptr<const TX>(), weight.ptr<const TW>(),
                                         rstd.ptr<const float>(), add_ptr, dx.ptr<TX>(), d,
                                         amax_out_bits(dx_amax));
      };
      with_flags(add != nullptr, dx_amax != nullptr, launch);
      loft::cuda::check_launch(op);
    });
  });
}

}  // namespace

void cuda::rmsnorm(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor* rstd,
                   Tensor* y_amax) {
  launch_rmsnorm("rmsnorm", nullptr, x, weight, eps, y, rstd, y_amax);
}

void cuda::add_rmsnorm(const Tensor& residual, Tensor& x, const Tensor& weight, float eps,
                       Tensor& y, Tensor* rstd, Tensor* y_amax) {
  launch_rmsnorm("add_rmsnorm", &residual, x, weight, eps, y, rstd, y_amax);
}

void cuda::rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                            const Tensor& rstd, Tensor& dx, Tensor* dweight) {
  launch_rmsnorm_backward("rmsnorm_backward", dy, x, weight, rstd, nullptr, dx, dweight, nullptr);
}

void cuda::rmsnorm_backward_add(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                const Tensor& rstd, const Tensor& add, Tensor& dx, Tensor* dweight,
                                Tensor* dx_amax) {
  launch_rmsnorm_backward("rmsnorm_backward_add", dy, x, weight, rstd, &add, dx, dweight, dx_amax);
}

}  // namespace loft::ops
