// Normalized Hadamard transforms along the last dimension, for every Llama width.
//
// A width n = K·2^m is rotated by H = (H_K ⊗ H_{2^m}) / √n: a fast Walsh–Hadamard transform of
// length 2^m on each of the K sub-rows, then a mix of the K sub-rows by a ±1 K×K Hadamard matrix
// (Paley I / Paley II / Sylvester doubling). Widths with no such K (11008 = 172·64) get a
// block-diagonal H of equal blocks (43 blocks of 256), still orthogonal; plans say so. Nothing is
// ever zero-padded or truncated: a width with no orthogonal plan is an Error naming it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft::quant {

// A ±1 Hadamard matrix of order k (H·Hᵀ = k·I), row-major.
struct HadamardMatrix {
  int k = 0;
  std::vector<int8_t> entries;  // k·k values, each +1 or -1
  std::string construction;     // "Paley I (q=11)", "Sylvester 2 x [Paley I (q=19)]", ...
  int at(int row, int col) const { return entries[size_t(row) * size_t(k) + size_t(col)]; }
};

// Largest order we build: the K-mix costs K multiply-adds per element.
constexpr int kMaxHadamardOrder = 256;
// From this order on, the CUDA row transform mixes on tensor cores where the plan allows it
// (2^m of 32..512, the segment in shared memory: engine/quant/cuda/hadamard_kmix_mma.cuh), not in
// the CPU's order: its results agree with hadamard_transform on the CPU to fp32 accuracy for F32
// rows (2^-18 of the sums for BF16 rows, far below their rounding), not bit for bit. Smaller
// orders (and the token transform) stay bit for bit.
constexpr int kTensorCoreMixOrder = 64;
// Smallest diagonal block of a block-diagonal plan: blocks of 2 barely mix, so such widths fail.
constexpr int64_t kMinHadamardBlock = 4;

// True when hadamard_matrix(k) can build order k (1, 2, Paley I/II from a prime, or doubling).
bool hadamard_order_supported(int k);
// The order-k matrix, built on first use and cached for the process (the reference stays valid).
// Throws Error naming k when no construction applies.
const HadamardMatrix& hadamard_matrix(int k);

// How a width n is rotated: n / block diagonal blocks, each of length block = k·pow2, rotated by
// (H_k ⊗ H_pow2) / √block. A full (not block-diagonal) plan has block == n.
struct HadamardPlan {
  int64_t n = 0;
  int64_t block = 0;
  int64_t pow2 = 1;  // 2^m, the fast Walsh–Hadamard length
  int log2_pow2 = 0;
  int k = 1;
  const HadamardMatrix* matrix = nullptr;  // the cached order-k matrix

  int64_t blocks() const { return n / block; }
  bool block_diagonal() const { return block != n; }
  float scale() const;  // 1/√block
  // One line: "n=768: 12 x 64 (K=12 Paley I (q=11), FWHT 64), scale 1/sqrt(768)".
  std::string describe() const;
};

// The plan for width n: the largest 2^m dividing n with n/2^m a supported order; else the largest
// block (≥ kMinHadamardBlock) dividing n that has such a plan, repeated block-diagonally. Throws
// Error naming n when neither exists (or n < 1).
HadamardPlan plan_for(int64_t n);

// The plan's n×n matrix H (F32, CPU) from the Kronecker formula entry by entry; for tests and
// small n only.
Tensor hadamard_dense(const HadamardPlan& plan);

// Rotates every row of x ([..., n], F32 on the CPU; F32 or BF16 on CUDA with fp32 math) into y of
// the same shape, dtype and device: forward y = x·H, inverse y = x·Hᵀ (the exact inverse: Paley
// matrices are not symmetric). y may be x itself (in place). Throws Error naming the tensors when
// shapes, dtypes or devices disagree or the last dimension is not plan.n.
void hadamard_transform(const HadamardPlan& plan, const Tensor& x, const Tensor& y,
                        bool inverse = false);
// Same, with plan_for(x.size(-1)).
void hadamard_transform(const Tensor& x, const Tensor& y, bool inverse = false);

// ---- along the token dimension (HALO level 2: H_T·dY) ----------------------------------------
// Token blocks are capped so a CUDA thread block holds one block × 32 columns in shared memory;
// 256 tokens already spread an outlier row over many rows.
constexpr int64_t kMaxTokenBlock = 256;
// Smallest block accepted before padding instead: blocks of 2 or 4 tokens barely mix.
constexpr int64_t kMinTokenBlock = 64;

// The plan for `tokens` rows: n = the smallest padded count >= tokens that splits into equal
// blocks of min(n, >= kMinTokenBlock) tokens, each at most kMaxTokenBlock with a full (K·2^m)
// Hadamard; the padding (n - tokens < 64 rows) is zero rows, so H_T stays exactly orthogonal on
// the padded space and nothing is truncated. Cached per count.
HadamardPlan token_plan(int64_t tokens);

// Rotates every COLUMN of x as hadamard_transform rotates every row: forward Y = Hᵀ·X, inverse
// Y = H·X, with H = hadamard_dense(plan) (so H_T := Hᵀ). x [rx, N] and y [ry, N] with rx, ry <=
// plan.n: x's missing rows are zeros, y receives the first ry rows of the result (pad with
// rx < n going forward, drop the padding with ry < n coming back). Same dtypes and devices as
// hadamard_transform; y must not overlap x.
void token_transform(const HadamardPlan& plan, const Tensor& x, const Tensor& y,
                     bool inverse = false);

}  // namespace loft::quant
