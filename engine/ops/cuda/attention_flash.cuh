// Device pieces shared by the flash attention forward and backward kernels: the bf16 tensor-core
// MMA (mma.sync m16n8k16, sm_80+: runs on sm_89, sm_90 and sm_120), fragment loads from shared
// memory, tile loads from global memory, and the document/causal mask. Include only from .cu.
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
// Shared-memory tiles are row-major with rows of D + 8 bf16: the 8-element pad shifts each row by
// 4 banks, so the 32-bit loads of a fragment (8 rows × 4 pairs) and the 16-bit column loads
// (pairs of rows 2c, 2c+1 × 8 columns) hit distinct banks.
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

// Two fp32 values rounded to bf16, lo in the low half.
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  return u;
}

// p[0], p[1] (adjacent in a row) as one register.
__device__ __forceinline__ uint32_t load_pair(const bf16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// *lo, *hi (the same column of two rows) as one register.
__device__ __forceinline__ uint32_t load_column_pair(const bf16* lo, const bf16* hi) {
  return uint32_t(__bfloat16_as_ushort(*lo)) | (uint32_t(__bfloat16_as_ushort(*hi)) << 16);
}

// A fragment of the 16×16 block at (row0, col0) of a row-major tile with row stride `ld`.
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16* tile, int ld, int row0,
                                       int col0, int g, int c) {
  const bf16* p = tile + (row0 + g) * ld + col0 + 2 * c;
  a[0] = load_pair(p);
  a[1] = load_pair(p + 8 * ld);
  a[2] = load_pair(p + 8);
  a[3] = load_pair(p + 8 * ld + 8);
}

// B fragment (k = 16 columns from col0, n = 8 rows from row0) of a tile read transposed: B[k][n] =
// tile[row0 + n][col0 + k]. Used where the tile's rows are the product's output columns (keys of
// Q·Kᵀ, queries of K·Qᵀ).
__device__ __forceinline__ void load_b_rows(uint32_t& b0, uint32_t& b1, const bf16* tile, int ld,
                                            int row0, int col0, int g, int c) {
  const bf16* p = tile + (row0 + g) * ld + col0 + 2 * c;
  b0 = load_pair(p);
  b1 = load_pair(p + 8);
}

// B fragment (k = 16 rows from row0, n = 8 columns from col0) of a tile read as is: B[k][n] =
// tile[row0 + k][col0 + n]. Used where the tile's rows are the product's reduction (P·V, dS·K).
__device__ __forceinline__ void load_b_cols(uint32_t& b0, uint32_t& b1, const bf16* tile, int ld,
                                            int row0, int col0, int g, int c) {
  const bf16* p = tile + (row0 + 2 * c) * ld + col0 + g;
  b0 = load_column_pair(p, p + ld);
  b1 = load_column_pair(p + 8 * ld, p + 9 * ld);
}

// The A fragment of k-step kk from the fp32 C fragments of 8-column tiles 2kk and 2kk+1.
__device__ __forceinline__ void c_to_a(uint32_t (&a)[4], const float (&lo)[4],
                                       const float (&hi)[4]) {
  a[0] = pack(lo[0], lo[1]);
  a[1] = pack(lo[2], lo[3]);
  a[2] = pack(hi[0], hi[1]);
  a[3] = pack(hi[2], hi[3]);
}

// Copies `rows` rows of head `head` starting at row-local position `first` of batch row starting
// at token `row0` into a shared tile of stride D + 8; rows at or past `seq` become zeros. `src` is
// [tokens, heads, D] and 16-byte aligned (flash_supports), so every 8-element chunk is one uint4.
template <int D>
__device__ __forceinline__ void load_tile(bf16* tile, const bf16* src, int64_t row0, int first,
                                          int rows, int seq, int heads, int head) {
  constexpr int kChunks = D / 8;  // uint4 per row
  for (int idx = threadIdx.x; idx < rows * kChunks; idx += blockDim.x) {
    const int r = idx / kChunks, col = idx % kChunks * 8, pos = first + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (pos < seq)
      v = *reinterpret_cast<const uint4*>(src + ((row0 + pos) * heads + head) * D + col);
    *reinterpret_cast<uint4*>(tile + r * row_stride<D>() + col) = v;
  }
}

// The first key row-local query i may see: doc_start clamped into [0, i] (attention_cuda.h).
__device__ __forceinline__ int first_key(const int32_t* doc_start, int64_t row0, int i) {
  return min(max(int(doc_start[row0 + i]), 0), i);
}

}  // namespace loft::ops::cuda_attention::flash
