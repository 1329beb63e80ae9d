// Hopper's warpgroup MMA (wgmma.mma_async, sm_90a only) for the attention kernels: shared-memory
// matrix descriptors of the 128-byte swizzled layout, the fences around an asynchronous MMA, and
// the bf16 m64n128k16 and m64n64k16 products with fp32 accumulators (A from shared memory or from
// registers).
// Everything here compiles to nothing unless __CUDA_ARCH_FEAT_SM90_ALL is defined (an sm_90a
// build); callers guard their kernels the same way (LOFT_WGMMA). Include only from .cu.
//
// Layouts (PTX ISA, "Shared Memory Matrix Layout" of wgmma; T = 8 bf16 = 16 bytes):
// - A tile of R rows × 64 bf16 is stored as rows of 128 bytes, and 16-byte chunk c of row r sits at
//   chunk c ^ (r % 8) of that row (the 128-byte swizzle, Swizzle<3,4,3>); tiles are 1024-byte
//   aligned. Wider rows are split into such 64-column tiles ("halves" for head dim 128).
// - K-major operand (the reduction dim contiguous: Q and K of Q·Kᵀ): SBO = 1024 bytes (the next 8
//   rows), LBO unused; a k-step of 16 inside the 64 columns moves the start address 32 bytes.
// - MN-major operand (the output dim contiguous: V of P·V, transposed in the instruction): LBO =
//   the bytes between 64-column tiles along N, SBO = 1024 (the next 8 rows along K); a k-step of 16
//   rows moves the start address 2048 bytes. An A operand from shared memory may be MN-major too
//   (dS of the backward's dS·K, stored as dSᵀ), with the same layout along M.
//
// Accumulator fragment of m64nN (fp32) in warpgroup thread t (warp w = t / 32, lane = 4g + c):
// d[4i + 0, 1] = D[16w + g][8i + 2c, +1], d[4i + 2, 3] = D[16w + g + 8][8i + 2c, +1]; the A
// fragment of the register form is mma.sync's m16n8k16 A fragment for rows 16w..16w + 15, so two
// adjacent 8-column accumulator groups rounded to bf16 are the A of one k-step (attention_flash.cuh
// c_to_a), as FlashAttention-3 uses it.
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LOFT_WGMMA 1
#endif

namespace loft::ops::cuda_attention::wgmma {

// Descriptor of a 128-byte-swizzled operand starting at shared address `addr` (bytes).
__device__ __forceinline__ uint64_t descriptor(uint32_t addr, uint32_t lbo_bytes) {
  return uint64_t((addr & 0x3FFFF) >> 4) | uint64_t((lbo_bytes >> 4) & 0x3FFF) << 16 |
         uint64_t(1024 >> 4) << 32 | uint64_t(1) << 62;
}

// Shared-memory writes of the generic proxy (st.shared, cp.async) made visible to wgmma's async
// proxy; a barrier must follow before other threads' MMAs read them.
__device__ __forceinline__ void fence_proxy_async() {
#ifdef LOFT_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void fence() {
#ifdef LOFT_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void commit() {
#ifdef LOFT_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int n>
__device__ __forceinline__ void wait() {
#ifdef LOFT_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(n) : "memory");
#endif
}

// Keeps the compiler from moving reads or writes of accumulator registers across the
// asynchronous MMA that owns them until its wait.
template <int n>
__device__ __forceinline__ void fence_operands(float (&d)[n]) {
#pragma unroll
  for (int i = 0; i < n; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define LOFT_WGMMA_D64                                                                             \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "    \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, " \
  "%39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, " \
  "%58, %59, %60, %61, %62, %63}"
#define LOFT_WGMMA_D64_OPERANDS(d)                                                                 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),  \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),     \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),   \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),   \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),   \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),   \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),   \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),   \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// D (64×128 fp32) = A·B (+ D when accumulate), A 64×16 and B 16×128 both K-major in shared memory.
__device__ __forceinline__ void mma_ss(float (&d)[64], uint64_t a, uint64_t b, bool accumulate) {
#ifdef LOFT_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " LOFT_WGMMA_D64
      ", %64, %65, p, 1, 1, 0, 0;\n}\n"
      : LOFT_WGMMA_D64_OPERANDS(d)
      : "l"(a), "l"(b), "r"(int(accumulate)));
#endif
}

// D (64×128 fp32) += A·B, A 64×16 bf16 in registers (four 32-bit fragments), B 16×128 MN-major in
// shared memory.
__device__ __forceinline__ void mma_rs_mn(float (&d)[64], const uint32_t (&a)[4], uint64_t b) {
#ifdef LOFT_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " LOFT_WGMMA_D64
      ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : LOFT_WGMMA_D64_OPERANDS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
#endif
}

#define LOFT_WGMMA_D32                                                                             \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "    \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define LOFT_WGMMA_D32_OPERANDS(d)                                                                 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),  \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),     \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),   \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),   \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

// D (64×64 fp32) = A·B (+ D when accumulate), A 64×16 and B 16×64 both in shared memory, each
// K-major (0) or MN-major (1: read transposed).
template <int a_mn_major, int b_mn_major>
__device__ __forceinline__ void mma_ss_n64(float (&d)[32], uint64_t a, uint64_t b, bool accumulate) {
#ifdef LOFT_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " LOFT_WGMMA_D32
      ", %32, %33, p, 1, 1, %35, %36;\n}\n"
      : LOFT_WGMMA_D32_OPERANDS(d)
      : "l"(a), "l"(b), "r"(int(accumulate)), "n"(a_mn_major), "n"(b_mn_major));
#endif
}

#undef LOFT_WGMMA_D64
#undef LOFT_WGMMA_D64_OPERANDS
#undef LOFT_WGMMA_D32
#undef LOFT_WGMMA_D32_OPERANDS

}  // namespace loft::ops::cuda_attention::wgmma
