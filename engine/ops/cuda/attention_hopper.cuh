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
