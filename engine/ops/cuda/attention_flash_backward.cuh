// What the two flash attention backward kernels share (attention_flash_backward.cu: FlashAttention-2's
// layout, blocks of 128 keys; attention_flash_backward_small.cu: blocks of 64 keys, for GPUs whose
// blocks get less shared memory): their arguments, the dQ atomics and their launchers, which
// flash_backward (attention_flash_backward.cu) picks between. Include only from .cu.
#pragma once
#include <cstdint>

#include "engine/ops/cuda/attention_flash.cuh"

namespace loft::ops::cuda_attention::flash {

struct BackwardArgs {
  const bf16 *q, *k, *v, *dout;
  const float *lse, *drow;
  const int32_t* doc_start;
  float* dq;  // fp32 accumulator [T, Hq, D], zeroed
  bf16 *dk, *dv;
  int seq, hq, hkv, group;
  float scale, scale_log2;
  // Where a kv head's group is split over `splits` blocks (flash_backward, when one block per kv
  // head would leave SMs idle): each takes heads_per_block query heads and writes its fp32 dK/dV
  // partial [splits][T, Hkv, D] into dk_part/dv_part, summed in split order by a second kernel.
  int splits = 1, heads_per_block = 0;
  float *dk_part = nullptr, *dv_part = nullptr;
};

// dst[0] += x, dst[1] += y (dst 8-byte aligned).
__device__ __forceinline__ void atomic_add2(float* dst, float x, float y) {
#if __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(dst), make_float2(x, y));
#else
  atomicAdd(dst, x);
  atomicAdd(dst + 1, y);
#endif
}

// A step's shared buffers: Q and dO [2][kQueries × (D + 8)], and per query its lse, D and raw doc
// start [2][kQueries] each.
struct StepBuffers {
  bf16 *q, *dout;
  float *lse, *drow;
  int* doc;
};

// Starts the copies of a step's per-query values (lse, D, raw doc start of query head h, queries
// from q0 of the batch row starting at token row0) into buffer `buf` of `s`; queries past seq get
// zeros. Threads 0..kQueries − 1 copy; the caller commits.
template <int kQueries>
__device__ __forceinline__ void copy_step_stats_async(const BackwardArgs& a, const StepBuffers& s, int64_t row0,
                                                      int buf, int h, int q0) {
  if (threadIdx.x < kQueries) {
    const int i = q0 + threadIdx.x, bytes = i < a.seq ? 4 : 0, at = buf * kQueries + threadIdx.x;
    const int64_t t = row0 + (i < a.seq ? i : 0), th = t * a.hq + h;
    cp_async_4(s.lse + at, a.lse + th, bytes);
    cp_async_4(s.drow + at, a.drow + th, bytes);
    cp_async_4(s.doc + at, a.doc_start + t, bytes);
  }
}

// Starts the copies of a step into buffer `buf` of `s` (query head h, queries from q0 of the batch
// row starting at token row0); all kThreads threads call it, the caller commits.
template <int D, int kThreads, int kQueries>
__device__ __forceinline__ void copy_step_async(const BackwardArgs& a, const StepBuffers& s, int64_t row0,
                                                int buf, int h, int q0) {
  constexpr size_t tile = size_t(kQueries) * row_stride<D>();
  copy_tile_async<D, kThreads>(s.q + buf * tile, a.q, row0, q0, kQueries, a.seq, a.hq, h);
  copy_tile_async<D, kThreads>(s.dout + buf * tile, a.dout, row0, q0, kQueries, a.seq, a.hq, h);
  copy_step_stats_async<kQueries>(a, s, row0, buf, h, q0);
}

// What a block of the 128-key grid (attention_flash_backward.cu and _hopper.cu) works on: grid z
// runs over key tiles, first tiles (most query steps) first, y over batch rows, x over kv heads ×
// splits; the block takes key tile k0 of the batch row starting at token row0, kv head kvh, and
// its split's query heads h0..h0 + heads − 1.
struct KeyTileBlock {
  int k0, kvh, split, h0, heads;
  int64_t row0;
};
template <int kKeys>
__device__ __forceinline__ KeyTileBlock key_tile_block(const BackwardArgs& a) {
  KeyTileBlock b;
  b.k0 = blockIdx.z * kKeys, b.kvh = blockIdx.x / a.splits, b.split = blockIdx.x % a.splits;
  b.h0 = b.kvh * a.group + b.split * a.heads_per_block;
  b.heads = min(a.heads_per_block, a.group - b.split * a.heads_per_block);
  b.row0 = int64_t(blockIdx.y) * a.seq;
  return b;
}

// The queries that may see the key tile [k0, k0 + kKeys): from k0 (causal) to the last one whose
// document starts in or before the tile; returns one past it. `cut` (for every thread): some query
// of that range starts its document after k0, so every step needs the per-element mask, not only
// those crossing the diagonal. All kThreads threads call it; `q_end` is a shared int.
template <int kThreads, int kKeys>
__device__ __forceinline__ int queries_seeing_tile(const BackwardArgs& a, int64_t row0, int k0, int& q_end,
                                                   bool& cut) {
  if (threadIdx.x == 0) q_end = 0;
  __syncthreads();
  int last = -1;
  bool c = false;
#pragma unroll 4
  for (int i = k0 + threadIdx.x; i < a.seq; i += kThreads) {
    const int fk = first_key(a.doc_start, row0, i);
    if (fk <= k0 + kKeys - 1) last = i;
    c |= fk > k0;
  }
  last = __reduce_max_sync(~0u, last);
  if (threadIdx.x % kWarp == 0) atomicMax(&q_end, last + 1);
  cut = __syncthreads_or(c);
  return q_end;
}

// Steps of kQueries queries per query head that can see the key tile at k0 (from k0 to the last
// query whose document starts in or before the tile: queries_seeing_tile, whose `cut` it passes
// on). All kThreads threads call it; `q_end` is a shared int.
template <int kThreads, int kKeys, int kQueries>
__device__ __forceinline__ int steps_per_head(const BackwardArgs& a, int64_t row0, int k0, int& q_end, bool& cut) {
  return (queries_seeing_tile<kThreads, kKeys>(a, row0, k0, q_end, cut) - k0 + kQueries - 1) / kQueries;
}

// Writes key j's dK and dV (C-fragment row r: the pair [2r, 2r+1] of each n-tile) as bf16, n-tile
// nd at head-dim columns col + 8·nd; keys past seq are not written. With partials (a.dk_part),
// fp32 into split `split`'s partial of `tokens` rows instead.
template <int kTiles>
__device__ __forceinline__ void store_dk_dv(const BackwardArgs& a, int64_t row0, int kvh, int d, int j, int col,
                                            const float (&dk)[kTiles][4], const float (&dv)[kTiles][4], int r,
                                            int split = 0, int64_t tokens = 0) {
  if (j >= a.seq) return;
  const int64_t at = ((row0 + j) * a.hkv + kvh) * d + col;
  if (a.dk_part) {
    const int64_t part = split * tokens * a.hkv * d + at;
#pragma unroll
    for (int nd = 0; nd < kTiles; ++nd) {
      *reinterpret_cast<float2*>(a.dk_part + part + nd * 8) = make_float2(dk[nd][2 * r], dk[nd][2 * r + 1]);
      *reinterpret_cast<float2*>(a.dv_part + part + nd * 8) = make_float2(dv[nd][2 * r], dv[nd][2 * r + 1]);
    }
    return;
  }
#pragma unroll
  for (int nd = 0; nd < kTiles; ++nd) {
    *reinterpret_cast<uint32_t*>(a.dk + at + nd * 8) = pack(dk[nd][2 * r], dk[nd][2 * r + 1]);
    *reinterpret_cast<uint32_t*>(a.dv + at + nd * 8) = pack(dv[nd][2 * r], dv[nd][2 * r + 1]);
  }
}

// Launches a backward kernel with `bytes` of dynamic shared memory on the device's loft stream.
template <typename Kernel>
void launch_backward(Kernel* kernel, size_t bytes, dim3 grid, int threads, const BackwardArgs& a, int device,
                     const char* what) {
  cuda_kernels::allow_dynamic_smem(kernel, bytes, device);
  kernel<<<grid, threads, bytes, loft::cuda::stream(device)>>>(a);
  loft::cuda::check_launch(what);
}

// Launch the wgmma kernel (attention_flash_backward_hopper.cu: head dim 128, sm_90a code on a
// compute capability 9.0 device, hopper_backward_supports) over the 128-key layout's grid: one
// block per (kv head × split, batch row, key tile of 128).
void launch_backward_hopper(const BackwardArgs& a, dim3 grid, int device);

// Launch the 64-key kernel over `rows` batch rows: head dim 64 or 128 (flash_supports). Its
// blocks take at most 75 KiB of shared memory, which every sm_80+ GPU gives.
void launch_backward_small(const BackwardArgs& a, int head_dim, int rows, int device);

}  // namespace loft::ops::cuda_attention::flash
