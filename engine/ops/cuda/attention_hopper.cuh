// What the wgmma attention kernels (attention_flash_forward_hopper.cu, attention_flash_backward_
// hopper.cu) share: the copy of a head-dim-128 tile from global memory into the 128-byte swizzled
// layout wgmma reads (wgmma.cuh), and the wait that hands copied tiles to the MMAs (sm_80+ code;
// its wgmma fence is empty outside sm_90a). Include only from .cu.
#pragma once
#include "engine/ops/cuda/attention_flash.cuh"
#include "engine/ops/cuda/wgmma.cuh"

namespace loft::ops::cuda_attention::hopper {

using flash::bf16;

// The first 1024-byte boundary (what the swizzled tiles need) in the dynamic shared array `smem`.
// Offsetting the shared array itself, not a generic pointer, keeps every access through the
// result a shared-memory instruction (LDS/STS rather than generic LD/ST).
__device__ __forceinline__ uint8_t* align_1024(uint8_t* smem) {
  return smem + (1024 - flash::smem_address(smem) % 1024) % 1024;
}

// Descriptor offsets (16-byte units) of a k-step into a swizzled tile: k-step ks over head dim 128
// of a K-major tile whose 64-column halves are `half` bytes apart (4 k-steps of 32 bytes in each
// half), and k-step kk of 16 rows along an MN-major tile.
__device__ __forceinline__ uint32_t head_dim_step(int ks, int half) { return uint32_t(ks / 4 * half + ks % 4 * 32) >> 4; }
__device__ __forceinline__ uint32_t row_step(int kk) { return uint32_t(kk * 16 * 128) >> 4; }

// A warpgroup's m64n(16K) fp32 accumulator (8K floats a thread) rounded to bf16 as the register A
// operand of a product over its 16K columns, K k-steps: k-step kk is accumulator groups 2kk and
// 2kk + 1 (wgmma.cuh).
template <int K, int N>
__device__ __forceinline__ void accumulator_to_a(uint32_t (&a)[K][4], const float (&acc)[N]) {
  static_assert(N == 8 * K, "an m64n(16K) accumulator holds 8K floats a thread");
#pragma unroll
  for (int kk = 0; kk < K; ++kk)
#pragma unroll
    for (int j = 0; j < 4; ++j) a[kk][j] = flash::pack(acc[8 * kk + 2 * j], acc[8 * kk + 2 * j + 1]);
}

// Starts copying rows first..first + Rows − 1 of head `head` ([tokens, heads, 128] from token
// row0) into the swizzled tile at shared address `tile` (two 64-column halves of Rows × 128 bytes,
// 1024-byte aligned); rows at or past `seq` become zeros. All Threads threads call it; the caller
// commits. Thread x copies 16-byte chunk x % 16 of rows x / 16 + (Threads / 16)·i: with the
// swizzle (chunk ^ row % 8) its shared offsets differ only by a constant a step, so the address
// arithmetic is done once.
template <int Rows, int Threads>
__device__ __forceinline__ void load_tile(uint32_t tile, const bf16* src, int64_t row0, int first, int seq,
                                          int heads, int head) {
  constexpr int kPerPass = Threads / 16, kHalf = Rows * 128;
  static_assert(kPerPass % 8 == 0 && Rows % kPerPass == 0, "a pass keeps each thread's swizzle phase");
  const int r0 = threadIdx.x / 16, chunk = threadIdx.x % 16;
  const uint32_t dst = tile + chunk / 8 * kHalf + r0 * 128 + ((chunk % 8 ^ (r0 & 7)) << 4);
  const int64_t stride = int64_t(kPerPass) * heads * 128;
  const bf16* from = src + ((row0 + first + r0) * heads + head) * 128 + chunk * 8;
#pragma unroll
  for (int i = 0; i < Rows / kPerPass; ++i) {
    const bool valid = first + r0 + kPerPass * i < seq;  // else nothing is read: src stays a valid address
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst + i * kPerPass * 128),
                 "l"(valid ? from + i * stride : src), "r"(valid ? 16 : 0)
                 : "memory");
  }
}

// Waits until at most `pending` of this thread's cp.async groups are in flight, makes what landed
// (and every shared store before it) visible to wgmma's async proxy, and meets the block's other
// threads: after it, every thread's copies up to that group are readable by the MMAs, and every
// read issued before it is done.
template <int pending>
__device__ __forceinline__ void copies_landed() {
  flash::cp_async_wait<pending>();
  wgmma::fence_proxy_async();
  __syncthreads();
}

}  // namespace loft::ops::cuda_attention::hopper
