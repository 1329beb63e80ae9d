// Device pieces shared by the flash attention forward and backward kernels: the bf16 tensor-core
// MMA (mma.sync m16n8k16), fragment loads from shared memory (ldmatrix), asynchronous tile copies
// from global memory (cp.async) and exp2 (ex2.approx). All sm_80+: they run on sm_89, sm_90 and
// sm_120. Include only from .cu.
//
// Fragment layout of mma.sync.m16n8k16.row.col (PTX ISA), lane = 4·g + c (g = lane / 4 in 0..7,
// c = lane % 4 in 0..3); a 32-bit register holds two bf16, the lower index in the low half:
//   A 16×16 (row-major, [m][k]): a0 = A[g][2c, 2c+1], a1 = A[g+8][2c, 2c+1],
//                                a2 = A[g][2c+8, 2c+9], a3 = A[g+8][2c+8, 2c+9]
//   B 16×8  ([k][n]):            b0 = B[2c, 2c+1][g], b1 = B[2c+8, 2c+9][g]
//   C 16×8  fp32 ([m][n]):       c0, c1 = C[g][2c, 2c+1], c2, c3 = C[g+8][2c, 2c+1]
// So the C fragments of two adjacent 8-column tiles, rounded to bf16, are the A fragment of the
// 16-wide k-step they cover (used for P·V, Pᵀ·dO and dSᵀ·Q without a trip through shared memory).
//
// ldmatrix.x4 reads four 8×8 bf16 matrices: lane l gives the address of row l % 8 of matrix l / 8
// (16 contiguous bytes), and register i of lane 4·g + c receives matrix i's [g][2c, 2c+1]; with
// .trans it receives [2c][g], [2c+1][g] (the matrix read transposed). So, for a tile stored
// row-major, one x4 is a whole A fragment, or the B fragments of two adjacent 8-wide n-tiles.
//
// Shared-memory tiles are row-major with rows of D + 8 bf16 (the dS tile: its width + 8): the pad
// shifts each row by 4 banks, so the 8 16-byte rows of an ldmatrix phase and the 32-bit fragment
// stores (8 rows × 4 pairs) hit distinct banks.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

#include "engine/ops/cuda/kernel_util.cuh"

namespace loft::ops::cuda_attention::flash {

using cuda_kernels::bf16;

constexpr int kWarp = 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int D>
constexpr int row_stride() {
  return D + 8;
}

// C += A·B on one warp.
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// c0 += A·B₀ and c1 += A·B₁ for the two n-tiles of a load_b_rows / load_b_cols result.
__device__ __forceinline__ void mma2(float (&c0)[4], float (&c1)[4], const uint32_t (&a)[4],
                                     const uint32_t (&b)[4]) {
  mma(c0, a, b[0], b[1]);
  mma(c1, a, b[2], b[3]);
}

// 2^x on the SFU (what exp2f is with fast math); 2^−inf = 0, tiny results flush to 0.
__device__ __forceinline__ float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two fp32 values rounded to bf16, lo in the low half.
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  return u;
}

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}

// ---- fragment loads (ldmatrix.x4; `p` is this lane's row address) ---------------------------
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(p)));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(p)));
}

// Lane addresses. "Row-major x4": matrices (rows +0, cols +0), (+8, +0), (+0, +8), (+8, +8).
// "Column-major x4": (+0, +0), (+0, +8), (+8, +0), (+8, +8).
__device__ __forceinline__ const bf16* x4_rowmajor(const bf16* tile, int ld, int row0, int col0,
                                                   int lane) {
  return tile + (row0 + lane % 16) * ld + col0 + lane / 16 * 8;
}
__device__ __forceinline__ const bf16* x4_colmajor(const bf16* tile, int ld, int row0, int col0,
                                                   int lane) {
  return tile + (row0 + lane % 8 + lane / 16 * 8) * ld + col0 + lane / 8 % 2 * 8;
}

// A fragment of the 16×16 block at (row0, col0) of a row-major tile: A[m][k] = tile[row0 + m]
// [col0 + k].
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16* tile, int ld, int row0,
                                       int col0, int lane) {
  ldsm_x4(a, x4_rowmajor(tile, ld, row0, col0, lane));
}

// A fragment of a tile stored transposed: A[m][k] = tile[row0 + k][col0 + m] (dSᵀ as dS).
__device__ __forceinline__ void load_a_trans(uint32_t (&a)[4], const bf16* tile, int ld, int row0,
                                             int col0, int lane) {
  ldsm_x4_trans(a, x4_colmajor(tile, ld, row0, col0, lane));
}

// B fragments of two n-tiles (b[0], b[1]: n = 0..7; b[2], b[3]: n = 8..15) with k = 16 columns
// from col0 of a tile whose rows are the product's output columns: B[k][n] = tile[row0 + n]
// [col0 + k] (keys of Q·Kᵀ, queries of K·Qᵀ).
__device__ __forceinline__ void load_b_rows(uint32_t (&b)[4], const bf16* tile, int ld, int row0,
                                            int col0, int lane) {
  ldsm_x4(b, x4_colmajor(tile, ld, row0, col0, lane));
}

// B fragments of two n-tiles (as load_b_rows) of a tile whose rows are the product's reduction:
// B[k][n] = tile[row0 + k][col0 + n] (V of P·V, dO and Q of Pᵀ·dO and dSᵀ·Q, K of dS·K).
__device__ __forceinline__ void load_b_cols(uint32_t (&b)[4], const bf16* tile, int ld, int row0,
                                            int col0, int lane) {
  ldsm_x4_trans(b, x4_rowmajor(tile, ld, row0, col0, lane));
}

// The A fragment of k-step kk from the fp32 C fragments of 8-column tiles 2kk and 2kk+1.
__device__ __forceinline__ void c_to_a(uint32_t (&a)[4], const float (&lo)[4],
                                       const float (&hi)[4]) {
  a[0] = pack(lo[0], lo[1]);
  a[1] = pack(lo[2], lo[3]);
  a[2] = pack(hi[0], hi[1]);
  a[3] = pack(hi[2], hi[3]);
}

// ---- asynchronous copies (cp.async, sm_80+) ------------------------------------------------
// `bytes` of *src then zeros up to the copy's size; with 0 nothing is read, but src stays a
// valid address.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_address(dst)), "l"(src),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most `n` of this thread's committed groups are in flight; a __syncthreads must
// follow before other threads' copies are read.
template <int n>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(n) : "memory");
}

// Starts copying `rows` rows of head `head` from row-local position `first` of the batch row
// starting at token `row0` into a shared tile of stride D + 8; rows at or past `seq` become
// zeros. `src` is [tokens, heads, D] and 16-byte aligned (flash_supports). All `threads` threads
// of the block call it; the caller commits.
template <int D, int threads>
__device__ __forceinline__ void copy_tile_async(bf16* tile, const bf16* src, int64_t row0,
                                                int first, int rows, int seq, int heads, int head) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  for (int idx = threadIdx.x; idx < rows * kChunks; idx += threads) {
    const int r = idx / kChunks, col = idx % kChunks * 8, pos = first + r;
    const bool valid = pos < seq;
    const bf16* from = src + ((row0 + (valid ? pos : 0)) * heads + head) * D + col;
    cp_async_16(tile + r * row_stride<D>() + col, from, valid ? 16 : 0);
  }
}

// The first key row-local query i may see: doc_start clamped into [0, i] (attention_cuda.h).
__device__ __forceinline__ int first_key(const int32_t* doc_start, int64_t row0, int i) {
  return min(max(int(doc_start[row0 + i]), 0), i);
}

}  // namespace loft::ops::cuda_attention::flash
