// Hopper's asynchronous machinery for warp-specialised kernels (sm_90a): transaction barriers
// (mbarrier), tensor-map tile loads (TMA, cp.async.bulk.tensor), named barriers between
// warpgroups and register reallocation between them (setmaxnreg). A producer thread issues a TMA
// load that arrives on a barrier when its bytes have landed; the consumers wait on that barrier's
// phase and then read the tile with wgmma directly: TMA writes through the async proxy, so no
// proxy fence and no block-wide barrier stand between a load and the MMAs that read it.
// Everything here compiles to nothing outside sm_90a code (LOFT_WGMMA, wgmma.cuh). Include only
// from .cu.
#pragma once
#include <cstdint>

#include "engine/ops/cuda/wgmma.cuh"

namespace loft::ops::cuda_attention::hopper_async {

// Makes the barrier at shared address `bar` expect `count` arrivals a phase.
__device__ __forceinline__ void barrier_init(uint32_t bar, uint32_t count) {
#ifdef LOFT_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}

// Makes the initialised barriers visible to the TMA unit (the async proxy); a block barrier must
// follow before other threads use them.
__device__ __forceinline__ void barriers_initialised() {
#ifdef LOFT_WGMMA
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// One arrival that also tells the barrier to wait for `bytes` more of TMA traffic this phase.
__device__ __forceinline__ void arrive_expect_bytes(uint32_t bar, uint32_t bytes) {
#ifdef LOFT_WGMMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}

__device__ __forceinline__ void arrive(uint32_t bar) {
#ifdef LOFT_WGMMA
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar) : "memory");
#endif
}

// Waits until the phase of parity `parity` (0 for a barrier's 1st, 3rd, ... phase) has completed.
// Waiting for parity 1 on a barrier that never completed a phase returns at once, which is what a
// producer filling a buffer for the first time wants.
__device__ __forceinline__ void wait(uint32_t bar, uint32_t parity) {
#ifdef LOFT_WGMMA
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
#endif
}

// Loads the box of a 4-dimensional tensor map (coordinates innermost first) into shared memory at
// `dst`, arriving on `bar` with its byte count when it has landed. Elements outside the tensor
// land as zeros and still count.
__device__ __forceinline__ void load_box(uint32_t dst, const void* map, int c0, int c1, int c2, int c3,
                                         uint32_t bar) {
#ifdef LOFT_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
#endif
}

// dst[0..bytes / 4) += the floats at shared address `src` (16-byte aligned, bytes a multiple of 16),
// element by element in L2 as atomics would be, but one bulk operation; grouped by bulk_commit.
__device__ __forceinline__ void reduce_add_bulk(float* dst, uint32_t src, uint32_t bytes) {
#ifdef LOFT_WGMMA
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst), "r"(src),
               "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_commit() {
#ifdef LOFT_WGMMA
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most n of this thread's bulk groups still read their shared source (reads_only)
// or are unfinished at all.
template <int n, bool reads_only>
__device__ __forceinline__ void bulk_wait() {
#ifdef LOFT_WGMMA
  if constexpr (reads_only)
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(n) : "memory");
  else
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(n) : "memory");
#endif
}

// Named barrier `id` (1..15; 0 is __syncthreads') over `threads` threads: sync waits for all of
// them, arrive counts this thread without waiting.
__device__ __forceinline__ void named_sync(int id, int threads) {
#ifdef LOFT_WGMMA
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#endif
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
#ifdef LOFT_WGMMA
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#endif
}

// The calling warpgroup's registers per thread lowered (a producer) or raised (consumers) to n; all
// 128 threads of the warpgroup call it.
template <int n>
__device__ __forceinline__ void lower_registers() {
#ifdef LOFT_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(n));
#endif
}
template <int n>
__device__ __forceinline__ void raise_registers() {
#ifdef LOFT_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(n));
#endif
}

}  // namespace loft::ops::cuda_attention::hopper_async
