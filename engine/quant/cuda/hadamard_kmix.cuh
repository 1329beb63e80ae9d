// The row kernel of plans with a K-mix (k > 1: 5120 = 20·256, 5632 = 44·128, 13824 = 108·128,
// 14336 = 28·512, ...): y_i,j = (Σ_src H[src][i] · FWHT(x_src)_j) · scale over the k sub-rows.
// Why its own kernel: the K-mix is k multiply-adds per element, so it runs at memory speed only
// when each shared-memory read feeds many of them. Each thread owns a tile of 8 outputs per
// column (8 rows of one 4-column quad, or 4 rows of two quads): per src it reads its quad(s) with
// one conflict-free 16-byte load and the tile's entries of H as a broadcast from shared memory,
// and adds them into 32 accumulators in registers. The tiles cover a segment exactly (k·2^m / 32
// of them), and the outputs go straight to the epilogue, 4 consecutive at a time.
// Loading and the low FWHT stages are hadamard_vec.cuh's (16 elements at a time, in registers and
// across lanes); the staged copy is XOR-swizzled so that the 16-byte stores of 16 consecutive
// floats a thread and the K-mix's column reads are free of bank conflicts. Blocks loop over
// segments so H', staged once per block, is not re-read per row. Sums run src = 0..k-1 from 0 in
// fp32 (±1 · v is exact, so the fma is the CPU's add), then × scale: the CPU reference's results
// bit for bit. At most 512 threads (64 registers each, two blocks an SM at 14336).
// Include only from hadamard_cuda.cu (Epi: its epilogues).
#pragma once
#include "engine/quant/cuda/hadamard_vec.cuh"

namespace loft::quant::kmix {

constexpr int kLoadE = 16, kLog2LoadE = 4;  // elements a thread loads and turns at a time
constexpr int kTileRows = 8;  // rows of a full tile (a k % 8 == 4 remainder takes 4 rows × 2 quads)
constexpr int kMaxThreads = 512;

struct KmixParams {
  int seg;   // k·2^m, a multiple of 32 (the swizzle stays within a segment)
  int segs;  // segments per block
  int log2_p, k;
  int h_rows;       // rows of H' staged at a time: k when H' stays resident
  int64_t total_segs, groups;  // groups = ceil(total_segs / segs)
  float scale;
  const float* h;  // H' [k][k]: H'[src][i] = H[src][i] forward, H[i][src] inverse
};

// Staged position of in-segment element e: bits 2-3 (of the 16-byte chunk within a 128-byte
// line) XOR bits 5-6, so the 8 lanes of a quarter warp storing 16 consecutive floats each hit 8
// different chunks. It moves nothing out of its line, and for 2^m >= 128 it commutes with adding
// src·2^m: swz(src·2^m + j) = src·2^m + swz(j).
__device__ __forceinline__ int swz(int e) { return e ^ (((e >> 5) & 3) << 2); }

// n floats (a multiple of 4) of H' from global into shared memory, by all threads.
__device__ __forceinline__ void copy_h(float* dst, const float* src, int n) {
  for (int i = threadIdx.x; i < n / 4; i += blockDim.x)
    reinterpret_cast<float4*>(dst)[i] = __ldg(reinterpret_cast<const float4*>(src) + i);
}

// Adds rows [lo, hi) of the K-mix into acc for a tile of R rows from i0 × Q quads at columns
// col[q] (R·Q = 8, acc[r][4q + c]). hs holds H' from row h0 on. kLinear (2^m >= 128): the
// staged quads of successive src are 2^m floats apart.
template <int R, int Q, bool kLinear>
__device__ __forceinline__ void mix_rows(const float* s, const float* hs, int h0, int k, int log2_p,
                                         int lo, int hi, int i0, const int (&col)[Q], float (&acc)[32]) {
  int base[Q];
#pragma unroll
  for (int q = 0; q < Q; ++q) base[q] = kLinear ? swz(col[q]) : col[q];
#pragma unroll 2
  for (int src = lo; src < hi; ++src) {
    float4 sv[Q];
#pragma unroll
    for (int q = 0; q < Q; ++q) {
      const int e = (src << log2_p) + base[q];
      sv[q] = *reinterpret_cast<const float4*>(s + (kLinear ? e : swz(e)));
    }
    const float* hrow = hs + (src - h0) * k + i0;
#pragma unroll
    for (int r4 = 0; r4 < R; r4 += 4) {
      const float4 h = *reinterpret_cast<const float4*>(hrow + r4);
      const float hv[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int q = 0; q < Q; ++q) {
          float* a = acc + (r4 + r) * 4 * Q + 4 * q;
          a[0] = __fmaf_rn(hv[r], sv[q].x, a[0]);
          a[1] = __fmaf_rn(hv[r], sv[q].y, a[1]);
          a[2] = __fmaf_rn(hv[r], sv[q].z, a[2]);
          a[3] = __fmaf_rn(hv[r], sv[q].w, a[3]);
        }
    }
  }
}

// The tile's outputs × scale to the epilogue, 4 consecutive elements at a time.
template <int R, int Q, typename Epi>
__device__ __forceinline__ void put_tile(Epi& epi, int64_t seg_base, int log2_p, int i0,
                                         const int (&col)[Q], const float (&acc)[32], float scale) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int q = 0; q < Q; ++q) {
      float out[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) out[c] = __fmul_rn(acc[r * 4 * Q + 4 * q + c], scale);
      epi.template put_n<4>(seg_base + (int64_t(i0 + r) << log2_p) + col[q], out);
    }
}

// x and y may alias: a block reads all of its segments before it writes any of them.
template <typename T, typename Epi>
__global__ void __launch_bounds__(kMaxThreads) hadamard_rows_kmix(const T* x, KmixParams prm, Epi epi) {
  extern __shared__ float4 smem4[];
  float* const smem = reinterpret_cast<float*>(smem4);
  const int tid = threadIdx.x, lane = tid & 31, k = prm.k, log2_p = prm.log2_p;
  const int load_threads = prm.seg / kLoadE;       // per segment
  const int tiles = prm.seg / 32;                  // per segment: 8 outputs each
  const int loads = (prm.segs * load_threads + 31) / 32 * 32, mixes = prm.segs * tiles;
  float* const hs = smem + prm.segs * prm.seg;
  const bool resident = prm.h_rows == k;
  if (resident) copy_h(hs, prm.h, k * k);  // ordered before its use by the loop's barriers
  // Full tiles of 8 rows run quad-fastest (a warp shares its rows: H' is a broadcast); with
  // k % 8 == 4 the last 4 rows go as pairs of quads p/2 apart.
  const int q4 = 1 << (log2_p - 2), full = (k >> 3) * q4;

  epi.begin();
  for (int64_t g = blockIdx.x; g < prm.groups; g += gridDim.x) {
    const int64_t seg0 = g * prm.segs;
    __syncthreads();  // the previous group's mix is done with the staged copy
    // Load, turn and stage kLoadE consecutive elements at a time; whole warps take part.
    for (int vt = tid; vt < loads; vt += blockDim.x) {
      const int sl = vt / load_threads, t = vt - sl * load_threads;
      const bool live = sl < prm.segs && seg0 + sl < prm.total_segs;
      float v[kLoadE];
      vec::load_and_turn<T, kLoadE>(x + (live ? (seg0 + sl) * prm.seg + int64_t(t) * kLoadE : 0), live, v,
                                    log2_p, lane);
      if (live) {
        float* s = smem + sl * prm.seg;
#pragma unroll
        for (int i = 0; i < kLoadE; i += 4)
          *reinterpret_cast<float4*>(s + swz(t * kLoadE + i)) = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
      }
    }
    __syncthreads();
    // FWHT stages of stride >= 32·kLoadE in shared memory.
    for (int st = kLog2LoadE + 5; st < log2_p; ++st) {
      const int h = 1 << st;
      for (int q = tid; q < prm.segs * prm.seg / 2; q += blockDim.x) {
        const int sl = q / (prm.seg / 2), r = q - sl * (prm.seg / 2);
        if (seg0 + sl >= prm.total_segs) continue;
        float* s = smem + sl * prm.seg;
        const int lo = ((r >> st) << (st + 1)) + (r & (h - 1));
        const float a = s[swz(lo)], b = s[swz(lo + h)];
        s[swz(lo)] = a + b;
        s[swz(lo + h)] = a - b;
      }
      __syncthreads();
    }
    // The K-mix, one tile per thread and round (rounds are the same for every thread: H' chunks).
    for (int u0 = 0; u0 < mixes; u0 += blockDim.x) {
      const int u = u0 + tid, sl = u / tiles, t = u - sl * tiles;
      const bool live = u < mixes && seg0 + sl < prm.total_segs;
      const float* s = smem + (live ? sl : 0) * prm.seg;
      const bool half = t >= full;
      const int i0 = half ? (k & ~7) : (t / q4) * kTileRows;
      const int c = half ? t - full : t % q4;
      const int col1[1] = {4 * c};
      const int col2[2] = {4 * c, 4 * c + (1 << log2_p) / 2};
      float acc[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
      for (int lo = 0; lo < k; lo += prm.h_rows) {
        const int hi = min(k, lo + prm.h_rows);
        if (!resident) {  // H' in chunks of rows: every thread takes part
          __syncthreads();
          copy_h(hs, prm.h + int64_t(lo) * k, (hi - lo) * k);
          __syncthreads();
        }
        const int h0 = resident ? 0 : lo;
        if (live && half) mix_rows<4, 2, false>(s, hs, h0, k, log2_p, lo, hi, i0, col2, acc);
        else if (live && log2_p >= 7) mix_rows<kTileRows, 1, true>(s, hs, h0, k, log2_p, lo, hi, i0, col1, acc);
        else if (live) mix_rows<kTileRows, 1, false>(s, hs, h0, k, log2_p, lo, hi, i0, col1, acc);
      }
      const int64_t seg_base = (seg0 + sl) * prm.seg;
      if (live && half) put_tile<4, 2>(epi, seg_base, log2_p, i0, col2, acc, prm.scale);
      else if (live) put_tile<kTileRows, 1>(epi, seg_base, log2_p, i0, col1, acc, prm.scale);
    }
  }
  epi.end();
}

}  // namespace loft::quant::kmix
