// What the wgmma attention kernels (attention_flash_forward_hopper.cu, attention_flash_backward_
// hopper.cu) share: the 1024-byte alignment of their swizzled tiles (wgmma.cuh), the descriptor
// steps through a head-dim-128 tile, and an accumulator rounded into the A operand of the next
// product. Their tiles arrive by TMA (hopper_async.cuh). Include only from .cu.
#pragma once
#include "engine/ops/cuda/attention_flash.cuh"
#include "engine/ops/cuda/hopper_async.cuh"
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

// Tokens first.. of one head, all 128 head-dim columns, from a tile map (head_tile_map.h: one
// 64-column box a half) into the tile at shared address `tile`, its halves `half_bytes` apart,
// arriving on the barrier `bar`.
__device__ __forceinline__ void load_head_tile(uint32_t tile, uint32_t half_bytes, const void* map, int head,
                                               int first, int row, uint32_t bar) {
  hopper_async::load_box(tile, map, 0, head, first, row, bar);
  hopper_async::load_box(tile + half_bytes, map, 64, head, first, row, bar);
}

}  // namespace loft::ops::cuda_attention::hopper
