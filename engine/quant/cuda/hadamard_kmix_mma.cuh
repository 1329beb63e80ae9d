// The row kernel of plans with a large K-mix (k >= kTensorCoreMixOrder: 13824 = 108·128,
// 18944 = 148·128, 27648 = 108·256, ...) on tensor cores. Why: the fp32 K-mix of
// hadamard_kmix.cuh is k multiply-adds per element on the CUDA cores, and at k = 148 (Qwen2.5-7B's
// MLP width) that made HALO's rotations half again as long as the rest of its quantization.
// Per segment the mix is one product Y = A·S, A k × k and S k × 2^m (k padded to kp, a multiple of 16):
// A[i][src] = H'[src][i] = ±1 is exact in bf16, and each fp32 value of S goes in as bf16 pieces:
// three for F32 rows (hi + mid + lo, exact to 2^-27 relative: the mix to fp32 accuracy), two for
// BF16 rows (hi + lo, to 2^-18: a thousandth of the BF16 output's rounding step), each piece one
// bf16 MMA with fp32 accumulation. The sums run in another order than the CPU's: results agree
// with the CPU reference to fp32 accuracy, not bit for bit (hadamard.h says which plans take
// this path).
// Loading and the FWHT (2^m <= 512, all in registers and across lanes) are hadamard_vec.cuh's;
// each value is split into its pieces once, as it is staged: S as P bf16 planes [kp][2^m + 8]
// (rows k..kp zero; the pad keeps ldmatrix conflict-free), read as B fragments by ldmatrix.trans.
// A is staged as sign bits [kp][words] (bit src of row i set where A[i][src] = -1), 3 KiB at
// k = 148. A warp's task is 5 m-tiles × 4 n-tiles of the output: per k-step it expands 5 A
// fragments from the bits and feeds each to 4·P MMAs (a first version that split S in fp32 per
// use took 1.4× as long: issue-bound on the split; the load/FWHT phase is not overlapped with
// the MMAs yet, docs/perf-journal.md).
// Include only from hadamard_cuda.cu (Epi: its epilogues).
#pragma once
#include <type_traits>

#include "engine/ops/cuda/attention_flash.cuh"  // mma(), ldmatrix and the m16n8k16 fragment layout
#include "engine/quant/cuda/hadamard_vec.cuh"

namespace loft::quant::kmix_mma {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kLoadE = 16;                   // elements a thread loads and turns at a time
constexpr int kMTiles = 5, kNTiles = 4;      // a warp's task: 80 output sub-rows × 32 columns
constexpr int kMinLog2P = 5, kMaxLog2P = 9;  // 32 <= 2^m (a task's columns) and 2^m <= 32·kLoadE

// bf16 pieces per value of S: three for F32 rows (to 2^-27), two for BF16 rows (to 2^-18).
template <typename T>
constexpr int pieces() {
  return std::is_same_v<T, float> ? 3 : 2;
}

struct MmaParams {
  int k, kp;     // order, and order rounded up to 16 (MMA tiles)
  int log2_p;    // 2^m columns per sub-row
  int ld;        // staged row stride in bf16: 2^m + 8
  int words;     // 32-bit words of sign bits per row of A
  int64_t total_segs;
  float scale;
  const uint32_t* signs;  // [kp][words]
};

// The staged layout of order k and 2^m columns (MmaParams carries it to the kernel).
inline int padded_order(int k) { return (k + 15) / 16 * 16; }
inline int sign_words(int kp) { return (kp + 31) / 32; }
inline int row_stride(int log2_p) { return (1 << log2_p) + 8; }

// Shared memory of one block with `pieces` planes: the planes, then the sign bits.
inline size_t smem_bytes(int pieces, int k, int log2_p) {
  const int kp = padded_order(k);
  return size_t(pieces) * size_t(kp) * size_t(row_stride(log2_p)) * 2 + size_t(kp) * size_t(sign_words(kp)) * 4;
}

// Two ±1 bf16 from sign bits 0 and 1 of `bits` (low half from bit 0).
__device__ __forceinline__ uint32_t signs_to_bf16x2(uint32_t bits) {
  return 0x3F803F80u | ((bits & 1u) << 15) | ((bits & 2u) << 30);
}

// x and y may alias: a block reads all of its segment before it writes any of it.
template <typename T, typename Epi>
__global__ void __launch_bounds__(kThreads, 2) hadamard_rows_kmix_mma(const T* x, MmaParams prm, Epi epi) {
  namespace fl = ops::cuda_attention::flash;
  using fl::bf16;
  constexpr int P = pieces<T>();
  extern __shared__ float4 smem4[];
  bf16* const planes = reinterpret_cast<bf16*>(smem4);
  const int k = prm.k, kp = prm.kp, log2_p = prm.log2_p, p = 1 << log2_p, ld = prm.ld, words = prm.words;
  const int plane = kp * ld;
  uint32_t* const sg = reinterpret_cast<uint32_t*>(planes + P * plane);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int seg = k << log2_p;
  // Once per block (ordered before use by the loop's barriers): zero padding rows, sign bits.
  for (int q = 0; q < P; ++q)
    for (int i = k * ld + tid; i < kp * ld; i += kThreads) planes[q * plane + i] = __float2bfloat16_rn(0.0f);
  for (int i = tid; i < kp * words; i += kThreads) sg[i] = prm.signs[i];
  const int load_threads = seg / kLoadE, loads = (load_threads + 31) / 32 * 32;
  const int m_groups = (kp / 16 + kMTiles - 1) / kMTiles, n_groups = p / (8 * kNTiles);
  const int tasks = m_groups * n_groups;
  const int g = lane >> 2, c = lane & 3;

  epi.begin();
  for (int64_t sgi = blockIdx.x; sgi < prm.total_segs; sgi += gridDim.x) {
    __syncthreads();  // the previous segment's MMAs are done with the planes
    // Load and turn kLoadE consecutive elements at a time (whole warps: the lane stages shuffle;
    // with 2^m >= 32 they lie in one sub-row), and stage their pieces.
    for (int vt = tid; vt < loads; vt += kThreads) {
      const bool live = vt < load_threads;
      float v[kLoadE];
      vec::load_and_turn<T, kLoadE>(x + sgi * seg + (live ? int64_t(vt) * kLoadE : 0), live, v, log2_p, lane);
      if (live) {
        const int e = vt * kLoadE;
        bf16* d = planes + (e >> log2_p) * ld + (e & (p - 1));
#pragma unroll
        for (int q = 0; q < P; ++q) {
          uint32_t w[kLoadE / 2];
#pragma unroll
          for (int i = 0; i < kLoadE; i += 2) {
            const float h0 = __bfloat162float(__float2bfloat16_rn(v[i]));
            const float h1 = __bfloat162float(__float2bfloat16_rn(v[i + 1]));
            w[i / 2] = fl::pack(h0, h1);
            v[i] -= h0;  // exact: what the next piece holds
            v[i + 1] -= h1;
          }
          uint4* dq = reinterpret_cast<uint4*>(d + q * plane);
          dq[0] = make_uint4(w[0], w[1], w[2], w[3]);
          dq[1] = make_uint4(w[4], w[5], w[6], w[7]);
        }
      }
    }
    __syncthreads();
    const int64_t seg_base = sgi * seg;
    for (int task = warp; task < tasks; task += kWarps) {
      const int m0 = (task / n_groups) * kMTiles * 16, n0 = (task % n_groups) * kNTiles * 8;
      float acc[kMTiles][kNTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
          for (int r = 0; r < 4; ++r) acc[mt][nt][r] = 0.0f;
      for (int k0 = 0; k0 < kp; k0 += 16) {
        // A fragments of the warp's m-tiles (those past kp repeat the last one, unused).
        const int w = k0 >> 5, sh = (k0 & 31) + 2 * c;
        uint32_t a[kMTiles][4];
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          const int row = min(m0 + mt * 16, kp - 16) + g;
          const uint32_t lo = sg[row * words + w] >> sh, hi = sg[(row + 8) * words + w] >> sh;
          a[mt][0] = signs_to_bf16x2(lo);
          a[mt][1] = signs_to_bf16x2(hi);
          a[mt][2] = signs_to_bf16x2(lo >> 8);
          a[mt][3] = signs_to_bf16x2(hi >> 8);
        }
        // Smallest pieces first; consecutive MMAs go to different accumulators.
#pragma unroll
        for (int q = P - 1; q >= 0; --q) {
          uint32_t b[kNTiles / 2][4];
#pragma unroll
          for (int j = 0; j < kNTiles / 2; ++j) fl::load_b_cols(b[j], planes + q * plane, ld, k0, n0 + 16 * j, lane);
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt)
            if (m0 + mt * 16 < kp)
#pragma unroll
              for (int j = 0; j < kNTiles / 2; ++j) fl::mma2(acc[mt][2 * j], acc[mt][2 * j + 1], a[mt], b[j]);
        }
      }
      // C fragment: rows g and g + 8 of each m-tile, columns 2c, 2c + 1 of each n-tile.
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int i = m0 + mt * 16 + g + 8 * half;
          if (i >= k) continue;
#pragma unroll
          for (int nt = 0; nt < kNTiles; ++nt) {
            const float out[2] = {__fmul_rn(acc[mt][nt][2 * half], prm.scale),
                                  __fmul_rn(acc[mt][nt][2 * half + 1], prm.scale)};
            epi.template put_n<2>(seg_base + (int64_t(i) << log2_p) + n0 + 8 * nt + 2 * c, out);
          }
        }
    }
  }
  epi.end();
}

}  // namespace loft::quant::kmix_mma
