// FALQON's kernels: the scaled E4M3 encode of A and the after-step row update (scores, top-k
// select, code update, buffer bookkeeping). Each mirrors its CPU reference in
// engine/methods/falqon/falqon_ops.cpp operation for operation (__fmaf_rn for std::fma, __fdiv_rn /
// __fmul_rn for the IEEE division and product), so the results are bit-identical.
#include <cuda_fp8.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "engine/methods/falqon/cuda/falqon_cuda.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/quant/fp8.h"

namespace loft::falqon::cuda {

namespace {

using namespace loft::ops::cuda_kernels;

constexpr int kThreads = 256;
// Room below the opt-in limit for the kernels' static shared arrays (the select's ~1.2 KB, the
// update's 32 B) beside their dynamic shared memory.
constexpr size_t kStaticMargin = 4096;

// Whether the select's n scores fit in a block's shared memory beside its own arrays.
bool keys_fit_shared(int64_t n, int dev) {
  return size_t(n) * sizeof(float) + kStaticMargin <= size_t(max_shared_optin(dev));
}

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

// Row scores: a tile of kScoreRows rows × kScoreCols columns is staged in shared memory with
// coalesced loads (one thread per row would read 32 rows' worth of cache lines per access), then
// each row's thread sums its columns in order, as the CPU does.
constexpr int kScoreRows = 64, kScoreCols = 32, kScoreThreads = 128;

// Rows [row_block·kScoreRows, +kScoreRows) of one B.
__device__ __forceinline__ void score_rows(const float* __restrict__ b, int64_t out, int64_t r,
                                           float* __restrict__ scores, int64_t row_block) {
  __shared__ float tile[kScoreRows][kScoreCols + 1];  // +1: the row-wise reads hit distinct banks
  const int64_t row0 = row_block * kScoreRows;
  const int rows = int(min(int64_t(kScoreRows), out - row0));
  float s = 0.0f;
  for (int64_t c0 = 0; c0 < r; c0 += kScoreCols) {
    const int cols = int(min(int64_t(kScoreCols), r - c0));
#pragma unroll
    for (int u = 0; u < kScoreRows * kScoreCols / kScoreThreads; ++u) {
      const int e = u * kScoreThreads + int(threadIdx.x), i = e / kScoreCols, j = e % kScoreCols;
      if (i < rows && j < cols) tile[i][j] = b[(row0 + i) * r + c0 + j];
    }
    __syncthreads();
    if (int(threadIdx.x) < rows)
      for (int j = 0; j < cols; ++j) s = __fadd_rn(s, fabsf(tile[threadIdx.x][j]));
    __syncthreads();
  }
  if (int(threadIdx.x) < rows) scores[row0 + threadIdx.x] = s;
}

__global__ void __launch_bounds__(kScoreThreads)
    scores_kernel(const float* __restrict__ b, int64_t out, int64_t r, float* __restrict__ scores) {
  score_rows(b, out, r, scores, blockIdx.x);
}

constexpr unsigned kFullMask = 0xffffffffu;

// e = 0..n-1 spread over the block, kStage per thread at a time: a batch's loads are all issued
// before its stores, so their latencies overlap (a plain loop waits for each load in turn).
template <int kStage, typename T, typename Load, typename Store>
__device__ __forceinline__ void staged_copy(int n, Load load, Store store) {
  for (int e0 = 0; e0 < n; e0 += int(blockDim.x) * kStage) {
    T v[kStage] = {};
#pragma unroll
    for (int u = 0; u < kStage; ++u) {
      const int e = e0 + u * int(blockDim.x) + int(threadIdx.x);
      if (e < n) v[u] = load(e);
    }
#pragma unroll
    for (int u = 0; u < kStage; ++u) {
      const int e = e0 + u * int(blockDim.x) + int(threadIdx.x);
      if (e < n) store(e, v[u]);
    }
  }
}

__device__ __forceinline__ unsigned warp_inclusive_scan(unsigned x) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned y = __shfl_up_sync(kFullMask, x, o);
    if (lane >= o) x += y;
  }
  return x;
}

// Exclusive prefix sum of v over the block (blockDim.x a multiple of 32); *total gets the sum.
// `warp_sums`: 32 ints of shared memory.
__device__ int block_exclusive_scan(int v, int* total, int* warp_sums) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = int(blockDim.x >> 5);
  const int x = int(warp_inclusive_scan(unsigned(v)));
  if (lane == 31) warp_sums[warp] = x;
  __syncthreads();
  if (warp == 0)
    warp_sums[lane] = int(warp_inclusive_scan(lane < warps ? unsigned(warp_sums[lane]) : 0u));
  __syncthreads();
  const int before = warp > 0 ? warp_sums[warp - 1] : 0;
  *total = warp_sums[warps - 1];
  __syncthreads();  // warp_sums is reused by the next call
  return before + x - v;
}

constexpr int kSelectThreads = 1024;

// The k largest keys (a float's bit pattern read as unsigned: the CPU's order) of n, in one block.
// The keys are read once into shared memory when they fit (`keys_in_shared`), else from global.
// Radix select, 8 bits a pass from the top: a histogram of the keys that match the prefix so far
// (warp-aggregated shared atomics: close scores share a bin), then a scan of the 256 bins from the
// top finds the bin holding the k-th largest key. A pass stops early once every key of that bin is
// taken. Then each thread walks a contiguous chunk of indices: the keys above the prefix and the
// `remaining` lowest-index keys equal to it under the mask are written in ascending index order.
__device__ __forceinline__ void select_block(const float* __restrict__ scores, int n, int k,
                                             int* __restrict__ idx, bool keys_in_shared) {
  extern __shared__ unsigned shared_keys[];
  __shared__ unsigned hist[256], bin_sums[8];
  __shared__ unsigned s_prefix, s_remaining;
  __shared__ int s_all_taken, warp_sums[32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const unsigned* keys = reinterpret_cast<const unsigned*>(scores);
  if (keys_in_shared) {
    staged_copy<8, unsigned>(
        n, [&](int i) { return keys[i]; }, [&](int i, unsigned v) { shared_keys[i] = v; });
    keys = shared_keys;
  }
  unsigned prefix = 0, mask = 0, remaining = unsigned(k);
  for (int shift = 24; shift >= 0; shift -= 8) {
    if (tid < 256) hist[tid] = 0;
    __syncthreads();
    for (int base = 0; base < n; base += blockDim.x) {  // uniform trip count: whole warps match
      const int i = base + tid;
      const unsigned key = i < n ? keys[i] : 0u;
      const bool match = i < n && (key & mask) == prefix;
      const unsigned bin = match ? (key >> shift) & 255u : 256u;
      const unsigned peers = __match_any_sync(kFullMask, bin);
      if (match && lane == __ffs(peers) - 1) atomicAdd(&hist[bin], unsigned(__popc(peers)));
    }
    __syncthreads();
    // Thread t < 256 holds bin 255 - t: the inclusive scan counts the keys in that bin and above.
    unsigned count = 0, incl = 0;
    if (tid < 256) {
      count = hist[255 - tid];
      incl = warp_inclusive_scan(count);
      if (lane == 31) bin_sums[warp] = incl;
    }
    __syncthreads();
    if (tid < 256) {
      for (int w = 0; w < warp; ++w) incl += bin_sums[w];
      const unsigned excl = incl - count;
      if (excl < remaining && remaining <= incl) {  // exactly one bin: the matches are >= remaining
        s_prefix = prefix | (unsigned(255 - tid) << shift);
        s_remaining = remaining - excl;
        s_all_taken = count == remaining - excl;
      }
    }
    __syncthreads();
    prefix = s_prefix;
    remaining = s_remaining;
    mask |= 255u << shift;
    const bool done = s_all_taken;
    __syncthreads();  // the s_* values and hist are rewritten by the next pass
    if (done) break;
  }
  const int per = (n + int(blockDim.x) - 1) / int(blockDim.x);
  const int lo = min(n, tid * per), hi = min(n, lo + per);
  int above = 0, equal = 0;
  for (int i = lo; i < hi; ++i) {
    const unsigned m = keys[i] & mask;
    above += m > prefix;
    equal += m == prefix;
  }
  int above_total = 0, equal_total = 0;
  const int above_before = block_exclusive_scan(above, &above_total, warp_sums);
  int equal_seen = block_exclusive_scan(equal, &equal_total, warp_sums);
  int pos = above_before + min(equal_seen, int(remaining));
  for (int i = lo; i < hi; ++i) {
    const unsigned m = keys[i] & mask;
    bool take = m > prefix;
    if (m == prefix) take = equal_seen++ < int(remaining);
    if (take) idx[pos++] = i;
  }
}

__global__ void __launch_bounds__(kSelectThreads)
    select_kernel(const float* __restrict__ scores, int n, int k, int* __restrict__ idx,
                  bool keys_in_shared) {
  select_block(scores, n, k, idx, keys_in_shared);
}

// The row update. A block takes kUpdateRows selected rows × kUpdateThreads·kUpdateCols columns;
// a thread kUpdateCols consecutive columns of each of those rows, so every A code it loads serves
// kUpdateRows·kUpdateCols products. Codes are loaded kCodeBatch rows of A ahead of the arithmetic.
// Per element the arithmetic is the CPU's: acc = Σ_c fma(B_ic, decode(A_cj)·s, acc) in c order.
// The blocks of the first column tile also add B's rows to `applied` (B is only read here).
constexpr int kUpdateThreads = 64, kUpdateCols = 2, kUpdateRows = 4, kCodeBatch = 16;

// Codes j0, j0+1 of a row of A as one word (byte q = column j0+q); zero past the row's end.
template <bool kVec>
__device__ __forceinline__ uint32_t load_codes(const uint8_t* row, int64_t j0, int64_t in) {
  static_assert(kUpdateCols == 2, "one 16-bit load per row of A");
  if constexpr (kVec) {
    return *reinterpret_cast<const uint16_t*>(row + j0);
  } else {
    uint32_t w = 0;
#pragma unroll
    for (int q = 0; q < kUpdateCols; ++q)
      if (j0 + q < in) w |= uint32_t(row[j0 + q]) << (8 * q);
    return w;
  }
}

// The update kernels' limits for k selected rows of a rank-r B (rows a grid dimension, B's rows in
// shared memory beside the kernel's own arrays): Error naming `op` past them.
void check_update_fits(const char* op, int64_t k, int64_t r, int dev) {
  LOFT_CHECK((k + kUpdateRows - 1) / kUpdateRows <= 65535 &&
                 size_t(kUpdateRows) * size_t(r) * sizeof(float) + kStaticMargin <= size_t(max_shared_optin(dev)),
             op, ": top-k ", k, " or rank ", r, " too large for the update kernel");
}

// Whether the update reads Wm's codes two at a time (an even row length on an even address).
bool codes_in_pairs(const RowUpdate& u) {
  return u.wm.size(1) % 2 == 0 && reinterpret_cast<uintptr_t>(u.wm.data()) % 2 == 0;
}

// The block of column tile `col_tile` and selected rows [row_block·kUpdateRows, +kUpdateRows).
template <bool kVec>
__device__ __forceinline__ void update_block(const int* __restrict__ idx, int k, const float* __restrict__ b,
                                             int64_t out, int r, int64_t in, const float* __restrict__ scale,
                                             uint8_t* __restrict__ wm, uint8_t* __restrict__ wt,
                                             uint8_t* __restrict__ changed, float* __restrict__ applied,
                                             int64_t col_tile, int row_block) {
  extern __shared__ float brows[];  // [kUpdateRows][r], zero past the last selected row
  __shared__ int64_t row_of[kUpdateRows];
  const int t0 = row_block * kUpdateRows, rows = min(kUpdateRows, k - t0);
  if (int(threadIdx.x) < rows) row_of[threadIdx.x] = idx[t0 + threadIdx.x];
  __syncthreads();
  staged_copy<4, float>(
      kUpdateRows * r, [&](int e) { return e / r < rows ? b[row_of[e / r] * r + e % r] : 0.0f; },
      [&](int e, float v) { brows[e] = v; });
  __syncthreads();
  if (col_tile == 0)
    staged_copy<4, float>(
        rows * r, [&](int e) { return applied[row_of[e / r] * r + e % r]; },
        [&](int e, float v) { applied[row_of[e / r] * r + e % r] = __fadd_rn(v, brows[e]); });
  const int64_t j0 = (col_tile * kUpdateThreads + threadIdx.x) * kUpdateCols;
  if (j0 >= in) return;
  const float s = *scale, lim = __fmul_rn(448.0f, s);
  const uint8_t* a = wm + out * in;
  float acc[kUpdateRows][kUpdateCols] = {};
  for (int c0 = 0; c0 < r; c0 += kCodeBatch) {
    uint32_t codes[kCodeBatch];
#pragma unroll
    for (int u = 0; u < kCodeBatch; ++u)
      codes[u] = c0 + u < r ? load_codes<kVec>(a + int64_t(c0 + u) * in, j0, in) : 0u;
#pragma unroll
    for (int u = 0; u < kCodeBatch; ++u) {
      if (c0 + u < r) {
        float aq[kUpdateCols];
#pragma unroll
        for (int q = 0; q < kUpdateCols; ++q)
          aq[q] = __fmul_rn(decode_e4m3(uint8_t(codes[u] >> (8 * q))), s);
#pragma unroll
        for (int row = 0; row < kUpdateRows; ++row) {
          const float bv = brows[row * r + c0 + u];
#pragma unroll
          for (int q = 0; q < kUpdateCols; ++q) acc[row][q] = __fmaf_rn(bv, aq[q], acc[row][q]);
        }
      }
    }
  }
#pragma unroll
  for (int row = 0; row < kUpdateRows; ++row) {
    if (row >= rows) break;
    const int64_t i = row_of[row];
    uint8_t* w = wm + i * in;
#pragma unroll
    for (int q = 0; q < kUpdateCols; ++q) {
      const int64_t j = j0 + q;
      if (j < in) {
        const uint8_t old = w[j];
        const float v = fminf(fmaxf(__fmaf_rn(decode_e4m3(old), s, acc[row][q]), -lim), lim);
        const uint8_t code = quant::f32_to_fp8_e4m3(__fdiv_rn(v, s));
        if (code != old && (code | old) != 0x80) {  // ±0 swaps are no change (as the CPU)
          changed[i] = 1;
          w[j] = code;
          if (wt) wt[j * out + i] = code;  // null: the caller keeps no transposed copy
        }
      }
    }
  }
}

template <bool kVec>
__global__ void __launch_bounds__(kUpdateThreads)
    update_kernel(const int* __restrict__ idx, int k, const float* __restrict__ b, int64_t out,
                  int r, int64_t in, const float* __restrict__ scale, uint8_t* __restrict__ wm,
                  uint8_t* __restrict__ wt, uint8_t* __restrict__ changed,
                  float* __restrict__ applied) {
  update_block<kVec>(idx, k, b, out, r, in, scale, wm, wt, changed, applied, blockIdx.x, int(blockIdx.y));
}

// Accumulate mode: the applied rows of B are zeroed once every update block has read them.
__global__ void zero_rows_kernel(const int* __restrict__ idx, int64_t k, int64_t r,
                                 float* __restrict__ b) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < k * r; t += stride)
    b[int64_t(idx[t / r]) * r + t % r] = 0.0f;
}

// ---- Every projection's after-step update at once (after_steps) -------------------------------
// Each phase is one launch whose blocks each do what the single launch's block with the same
// indices does for its projection (blockIdx.z or .y picks it), so the results are those of the
// calls in turn. The projections travel in the kernel parameters (up to 32 KiB since CUDA 12.1).
struct Job {
  float *b, *scores, *applied;
  int *idx;
  const float* scale;
  uint8_t *wm, *wt, *changed;
  int out, in, r, k;
  bool vec, zero_all;
};
constexpr int kMaxJobs = 256;
struct Jobs {
  Job job[kMaxJobs];
  bool keys_in_shared;  // every select of the launch reads its scores from shared memory
};
static_assert(sizeof(Jobs) <= 32000, "kernel parameters are limited to 32,764 bytes");

__global__ void __launch_bounds__(kScoreThreads) scores_batch_kernel(const __grid_constant__ Jobs jobs) {
  const Job& j = jobs.job[blockIdx.y];
  if (int64_t(blockIdx.x) * kScoreRows >= j.out) return;
  score_rows(j.b, j.out, j.r, j.scores, blockIdx.x);
}

__global__ void __launch_bounds__(kSelectThreads) select_batch_kernel(const __grid_constant__ Jobs jobs) {
  const Job& j = jobs.job[blockIdx.x];
  select_block(j.scores, j.out, j.k, j.idx, jobs.keys_in_shared);
}

__global__ void __launch_bounds__(kUpdateThreads) update_batch_kernel(const __grid_constant__ Jobs jobs) {
  const Job& j = jobs.job[blockIdx.z];
  if (int(blockIdx.y) * kUpdateRows >= j.k || int64_t(blockIdx.x) * kUpdateThreads * kUpdateCols >= j.in) return;
  if (j.vec)
    update_block<true>(j.idx, j.k, j.b, j.out, j.r, j.in, j.scale, j.wm, j.wt, j.changed, j.applied,
                       blockIdx.x, int(blockIdx.y));
  else
    update_block<false>(j.idx, j.k, j.b, j.out, j.r, j.in, j.scale, j.wm, j.wt, j.changed, j.applied,
                        blockIdx.x, int(blockIdx.y));
}

// B's selected rows (accumulate) or all of B (reset), once every update block has read them.
__global__ void zero_batch_kernel(const __grid_constant__ Jobs jobs) {
  const Job& j = jobs.job[blockIdx.y];
  const int64_t n = j.zero_all ? int64_t(j.out) * j.r : int64_t(j.k) * j.r;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += stride)
    j.b[j.zero_all ? t : int64_t(j.idx[t / j.r]) * j.r + t % j.r] = 0.0f;
}

// One launch of each phase for jobs[0, n).
void launch_jobs(Jobs& jobs, int n, int dev) {
  int max_out = 0, max_r = 0, max_k = 0;
  int64_t max_in = 0, max_zero = 0;
  for (int i = 0; i < n; ++i) {
    const Job& j = jobs.job[i];
    max_out = std::max(max_out, j.out), max_r = std::max(max_r, j.r), max_k = std::max(max_k, j.k);
    max_in = std::max<int64_t>(max_in, j.in);
    max_zero = std::max(max_zero, int64_t(j.zero_all ? j.out : j.k) * j.r);
  }
  cudaStream_t st = loft::cuda::stream(dev);
  scores_batch_kernel<<<dim3(unsigned((max_out + kScoreRows - 1) / kScoreRows), unsigned(n)), kScoreThreads, 0,
                        st>>>(jobs);
  loft::cuda::check_launch("falqon scores_batch_kernel");
  jobs.keys_in_shared = keys_fit_shared(max_out, dev);
  const size_t keys = jobs.keys_in_shared ? size_t(max_out) * sizeof(float) : 0;
  allow_dynamic_smem(select_batch_kernel, keys, dev);
  select_batch_kernel<<<unsigned(n), kSelectThreads, keys, st>>>(jobs);
  loft::cuda::check_launch("falqon select_batch_kernel");
  if (max_k > 0) {
    const int64_t tile = int64_t(kUpdateThreads) * kUpdateCols;
    const size_t smem = size_t(kUpdateRows) * size_t(max_r) * sizeof(float);
    allow_dynamic_smem(update_batch_kernel, smem, dev);
    const dim3 grid(unsigned(std::max<int64_t>(1, (max_in + tile - 1) / tile)),
                    unsigned((max_k + kUpdateRows - 1) / kUpdateRows), unsigned(n));
    update_batch_kernel<<<grid, kUpdateThreads, smem, st>>>(jobs);
    loft::cuda::check_launch("falqon update_batch_kernel");
  }
  if (max_zero > 0) {
    zero_batch_kernel<<<dim3(std::min(grid_for(max_zero, kThreads, dev), 1024u), unsigned(n)), kThreads, 0, st>>>(jobs);
    loft::cuda::check_launch("falqon zero_batch_kernel");
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

void row_scores(const Tensor& b, Tensor& scores) {
  const int dev = use_device(b);
  const int64_t out = b.size(0);
  if (out == 0) return;
  LOFT_CHECK((out + kScoreRows - 1) / kScoreRows < (int64_t(1) << 31), "falqon row_scores: ",
             b.str(), " has too many rows");
  scores_kernel<<<unsigned((out + kScoreRows - 1) / kScoreRows), kScoreThreads, 0,
                  loft::cuda::stream(dev)>>>(b.ptr<float>(), out, b.size(1), scores.ptr<float>());
  loft::cuda::check_launch("falqon scores_kernel");
}

void select_topk(const Tensor& scores, Tensor& idx) {
  const int dev = use_device(scores);
  LOFT_CHECK(scores.numel() < (int64_t(1) << 30), "falqon select_topk: ", scores.str(),
             " has too many rows");
  const bool in_shared = keys_fit_shared(scores.numel(), dev);
  const size_t bytes = in_shared ? size_t(scores.numel()) * sizeof(float) : 0;
  allow_dynamic_smem(select_kernel, bytes, dev);
  select_kernel<<<1, kSelectThreads, bytes, loft::cuda::stream(dev)>>>(
      scores.ptr<float>(), int(scores.numel()), int(idx.numel()), idx.ptr<int>(), in_shared);
  loft::cuda::check_launch("falqon select_kernel");
}

void apply_rows(RowUpdate& u, bool zero_all) {
  const int dev = use_device(u.b);
  const int64_t k = u.idx.numel(), out = u.b.size(0), r = u.b.size(1), in = u.wm.size(1);
  cudaStream_t st = loft::cuda::stream(dev);
  if (k > 0) {
    check_update_fits("falqon apply_rows", k, r, dev);
    const int64_t row_blocks = (k + kUpdateRows - 1) / kUpdateRows;
    const size_t smem = size_t(kUpdateRows) * size_t(r) * sizeof(float);  // B's rows
    const int64_t tile = int64_t(kUpdateThreads) * kUpdateCols;
    const dim3 grid(unsigned(std::max<int64_t>(1, (in + tile - 1) / tile)), unsigned(row_blocks));
    auto kernel = codes_in_pairs(u) ? update_kernel<true> : update_kernel<false>;
    allow_dynamic_smem(kernel, smem, dev);
    kernel<<<grid, kUpdateThreads, smem, st>>>(
        u.idx.ptr<int>(), int(k), u.b.ptr<float>(), out, int(r), in, u.scale.ptr<float>(),
        u.wm.ptr<uint8_t>(), u.wt.defined() ? u.wt.ptr<uint8_t>() : nullptr, u.changed.ptr<uint8_t>(),
        u.applied.ptr<float>());
    loft::cuda::check_launch("falqon update_kernel");
    if (!zero_all && r > 0) {
      zero_rows_kernel<<<grid_for(k * r, kThreads, dev), kThreads, 0, st>>>(u.idx.ptr<int>(), k, r,
                                                                             u.b.ptr<float>());
      loft::cuda::check_launch("falqon zero_rows_kernel");
    }
  }
  if (zero_all) u.b.zero_();
}

void after_steps(std::vector<AfterStep>& steps) {
  if (steps.empty()) return;
  const int dev = use_device(steps[0].update.b);
  auto jobs = std::make_unique<Jobs>();
  int n = 0;
  for (AfterStep& a : steps) {
    RowUpdate& u = a.update;
    const int64_t out = u.b.size(0), r = u.b.size(1), in = u.wm.size(1), k = u.idx.numel();
    LOFT_CHECK(out < (int64_t(1) << 30) && in <= INT32_MAX, "falqon after_steps: ", u.b.str(), " and ",
               u.wm.str(), " too large");
    check_update_fits("falqon after_steps", k, r, dev);
    jobs->job[n++] = Job{u.b.ptr<float>(), a.scores.ptr<float>(), u.applied.ptr<float>(),
                         u.idx.ptr<int>(), u.scale.ptr<float>(), u.wm.ptr<uint8_t>(),
                         u.wt.defined() ? u.wt.ptr<uint8_t>() : nullptr, u.changed.ptr<uint8_t>(),
                         int(out), int(in), int(r), int(k), codes_in_pairs(u), a.zero_all};
    if (n == kMaxJobs) launch_jobs(*jobs, std::exchange(n, 0), dev);
  }
  if (n > 0) launch_jobs(*jobs, n, dev);
}

}  // namespace loft::falqon::cuda
