// HOT's integer GEMM on tensor cores with mma.sync: acc [M, N] = A [M, K]·B [N, K]ᵀ, both operands
// K-major bytes, int32 accumulation. One kernel serves both carriers, because the byte layout of
// an m16n8k32 s8 fragment and of an m16n8k64 s4 fragment is the same (32 bytes of K per step:
// 32 s8 codes or 64 packed s4 codes); only the mma instruction differs.
// Tiling: 128×128 output tile per 256-thread block (8 warps as 4 along M × 2 along N, 32×64
// each), 64 bytes of K per stage, 3 cp.async stages (48 KiB of shared memory). Shared rows are 64
// bytes with their four 16-byte chunks XOR-swizzled by (row >> 1) & 3, so each ldmatrix phase
// (8 rows × 16 bytes) hits all 32 banks once. Rows past M or N load as zeros (cp.async src-size
// 0), so any M, N work; K (bytes) must be a multiple of 64.
// mma.sync with s8/s4 needs sm_80+; every architecture loft builds for (89, 90, 120) has it (for
// s4 on 90/120 ptxas emits it though the GPUs lack INT4 tensor cores; hot_gemm.h says when it runs).
#include <cstdint>

#include "engine/methods/hot/cuda/hot_cuda.h"
#include "engine/ops/cuda/kernel_util.cuh"

namespace loft::quant::cuda {

namespace {

constexpr int kBM = 128, kBN = 128, kBK = 64, kStages = 3, kThreads = 256;
constexpr int kStageBytes = (kBM + kBN) * kBK;
constexpr int kSmemBytes = kStages * kStageBytes;  // 48 KiB: no opt-in needed

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}

// Byte offset of 16-byte chunk `ch` (0..3) of row `r` in a swizzled 64-byte-row tile.
__device__ __forceinline__ int swz(int r, int ch) { return r * kBK + ((ch ^ ((r >> 1) & 3)) << 4); }

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}

template <bool kS4>
__device__ __forceinline__ void mma(int32_t (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kS4) {
    asm volatile(
        "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#else
  __trap();  // no integer tensor cores before sm_80
#endif
}

// Copies rows [r0, r0 + 128) × K bytes [kt·64, +64) of X [rows, kbytes] into a swizzled tile.
__device__ __forceinline__ void load_tile(uint8_t* tile, const uint8_t* x, int64_t rows,
                                          int64_t r0, int64_t kbytes, int kt) {
#pragma unroll
  for (int c = threadIdx.x; c < kBM * (kBK / 16); c += kThreads) {
    const int r = c >> 2, ch = c & 3;
    const int64_t gr = r0 + r;
    const uint8_t* src = x + (gr < rows ? gr : rows - 1) * kbytes + int64_t(kt) * kBK + ch * 16;
    cp_async16(smem_addr(tile + swz(r, ch)), src, gr < rows);
  }
}

template <bool kS4>
__global__ void __launch_bounds__(kThreads) mma_kernel(const uint8_t* a, const uint8_t* b,
                                                       int32_t* c, int64_t m, int64_t n,
                                                       int64_t kbytes) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t m0 = int64_t(blockIdx.y) * kBM, n0 = int64_t(blockIdx.x) * kBN;
  const int wm = (warp >> 1) * 32, wn = (warp & 1) * 64;
  const int ktiles = int(kbytes / kBK);
  int32_t acc[2][8][4] = {};

  auto stage_a = [&](int s) { return smem + s * kStageBytes; };
  auto stage_b = [&](int s) { return smem + s * kStageBytes + kBM * kBK; };
  auto load = [&](int s, int kt) {
    load_tile(stage_a(s), a, m, m0, kbytes, kt);
    load_tile(stage_b(s), b, n, n0, kbytes, kt);
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load(s, s);
    cp_async_commit();
  }
  const int j = lane >> 3, r8 = lane & 7;  // ldmatrix: which 8×8 matrix this lane addresses
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile kt landed; everyone is done reading the stage refilled next
    if (kt + kStages - 1 < ktiles) load((kt + kStages - 1) % kStages, kt + kStages - 1);
    cp_async_commit();
    const uint8_t* ta = stage_a(kt % kStages);
    const uint8_t* tb = stage_b(kt % kStages);
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {  // two 32-byte K steps per stage
      uint32_t af[2][4], bf[8][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        // matrices: (rows 0-7, bytes 0-15), (rows 8-15, 0-15), (rows 0-7, 16-31), (rows 8-15, 16-31)
        const int row = wm + mi * 16 + r8 + 8 * (j & 1);
        ldmatrix_x4(af[mi], smem_addr(ta + swz(row, ks * 2 + (j >> 1))));
      }
#pragma unroll
      for (int nj = 0; nj < 4; ++nj) {
        // matrices: (n 0-7, bytes 0-15), (n 0-7, 16-31), (n 8-15, 0-15), (n 8-15, 16-31)
        const int row = wn + nj * 16 + r8 + 8 * (j >> 1);
        uint32_t t[4];
        ldmatrix_x4(t, smem_addr(tb + swz(row, ks * 2 + (j & 1))));
        bf[2 * nj][0] = t[0], bf[2 * nj][1] = t[1];
        bf[2 * nj + 1][0] = t[2], bf[2 * nj + 1][1] = t[3];
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 8; ++ni) mma<kS4>(acc[mi][ni], af[mi], bf[ni]);
    }
  }
  cp_async_wait<0>();
  // Accumulator fragment: c0, c1 at (row lane/4, cols 2·(lane%4) + 0, 1), c2, c3 eight rows down.
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 8; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = m0 + wm + mi * 16 + (lane >> 2) + 8 * h;
        const int64_t col = n0 + wn + ni * 8 + 2 * (lane & 3);
        if (row < m && col < n)  // n is even: col + 1 < n too
          *reinterpret_cast<int2*>(c + row * n + col) =
              make_int2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
      }
}

template <bool kS4>
void launch(const Tensor& a, const Tensor& b, Tensor& acc) {
  const int dev = ops::cuda_kernels::use_device(acc);
  const int64_t m = a.size(0), n = b.size(0), kbytes = a.size(1);
  LOFT_CHECK(b.size(1) == kbytes && kbytes % kBK == 0 && n % 2 == 0 && acc.size(0) == m &&
                 acc.size(1) == n,
             "hot mma GEMM: A ", a.str(), ", B ", b.str(), " and acc ", acc.str(),
             " must be [M, K], [N, K] and [M, N] with K a multiple of 64 bytes and N even");
  LOFT_CHECK((m + kBM - 1) / kBM <= 65535, "hot mma GEMM: M = ", m, " needs too many tiles");
  if (m == 0 || n == 0) return;
  if (kbytes == 0) {
    acc.zero_();
    return;
  }
  const dim3 grid(unsigned((n + kBN - 1) / kBN), unsigned((m + kBM - 1) / kBM));
  mma_kernel<kS4><<<grid, kThreads, kSmemBytes, loft::cuda::stream(dev)>>>(
      a.ptr<uint8_t>(), b.ptr<uint8_t>(), acc.ptr<int32_t>(), m, n, kbytes);
  loft::cuda::check_launch(kS4 ? "hot mma_kernel<s4>" : "hot mma_kernel<s8>");
}

}  // namespace

bool hot_has_int4_tensor_cores(int device) {
  using ops::cuda_kernels::device_attribute;
  const int cc = device_attribute(cudaDevAttrComputeCapabilityMajor, device) * 10 +
                 device_attribute(cudaDevAttrComputeCapabilityMinor, device);
  return cc >= 80 && cc < 90;
}

void hot_mma_s8(const Tensor& a, const Tensor& b, Tensor& acc) { launch<false>(a, b, acc); }
void hot_mma_s4(const Tensor& a_packed, const Tensor& b_packed, Tensor& acc) {
  launch<true>(a_packed, b_packed, acc);
}

}  // namespace loft::quant::cuda
