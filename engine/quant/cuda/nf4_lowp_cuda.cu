// NF4-DQ -> FP8/INT8 codes in one kernel (HALO's NF4 backbone): each element decoded exactly as
// dequantize_nf4 to F32 does (__fmaf_rn for the absmax, __fmul_rn for the level), divided by the
// fixed scale with __fdiv_rn and encoded with the CPU's scalar encoders, so the bytes equal the
// CPU reference. Block (32, 8) per 32×32 tile; the transposed copy turns through shared memory
// so both the code reads and the writes run along rows.
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/quant/cuda/nf4_cuda.h"
#include "engine/quant/cuda/nf4_tables.cuh"
#include "engine/quant/cuda/quant_device.cuh"

namespace loft {

namespace {

using quant::LowpFormat;

constexpr int kTile = 32, kTileRows = 8;

template <LowpFormat F, bool kTransposed>
__global__ void nf4_to_lowp_kernel(const uint8_t* __restrict__ codes,
                                   const uint8_t* __restrict__ absmax_codes,
                                   const float* __restrict__ scales, float offset, int64_t rows,
                                   int64_t cols, float s, uint8_t* __restrict__ out,
                                   const __grid_constant__ Nf4Tables tab) {
  __shared__ float levels[16], map[256];
  __shared__ uint8_t tile[kTile][kTile + 1];
  const int tid = threadIdx.y * kTile + threadIdx.x;
  for (int k = tid; k < 256; k += kTile * kTileRows) map[k] = tab.map[k];
  if (tid < 16) levels[tid] = tab.levels[tid];
  __syncthreads();
  const int64_t r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.x) * kTile;
#pragma unroll
  for (int j = 0; j < kTile; j += kTileRows) {
    const int64_t r = r0 + threadIdx.y + j, c = c0 + threadIdx.x;
    if (r < rows && c < cols) {
      const int64_t e = r * cols + c, blk = e / kNf4BlockSize;
      const uint8_t byte = codes[e / 2];
      const int code = (e % 2 == 0) ? (byte >> 4) : (byte & 15);
      const float a = __fmaf_rn(map[absmax_codes[blk]], scales[blk / kNf4AbsmaxGroup], offset);
      const uint8_t q = quant::cuda::encode<F>(__fdiv_rn(__fmul_rn(levels[code], a), s));
      if constexpr (kTransposed)
        tile[threadIdx.y + j][threadIdx.x] = q;
      else
        out[e] = q;
    }
  }
  if constexpr (kTransposed) {
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTile; j += kTileRows) {
      const int64_t c = c0 + threadIdx.y + j, r = r0 + threadIdx.x;
      if (r < rows && c < cols) out[c * rows + r] = tile[threadIdx.x][threadIdx.y + j];
    }
  }
}

}  // namespace

void nf4_to_lowp_cuda(const Nf4Tensor& q, float scale, bool transposed, Tensor& codes) {
  const int dev = ops::cuda_kernels::use_device(codes);
  const int64_t rows = q.shape[0], cols = q.shape[1];
  if (rows == 0 || cols == 0) return;
  const int64_t gy = (rows + kTile - 1) / kTile;
  LOFT_CHECK(gy <= 65535, "nf4_to_lowp: ", shape_str(q.shape), " has too many rows for one launch");
  const dim3 grid(unsigned((cols + kTile - 1) / kTile), unsigned(gy));
  quant::cuda::dispatch_format(quant::format_of(codes.dtype(), "nf4_to_lowp"), [&](auto fc) {
    constexpr LowpFormat F = decltype(fc)::value;
    auto launch = [&](auto kernel) {
      kernel<<<grid, dim3(kTile, kTileRows), 0, cuda::stream(dev)>>>(
          q.codes.ptr<uint8_t>(), q.absmax_codes.ptr<uint8_t>(), q.absmax_scale.ptr<float>(),
          q.absmax_offset, rows, cols, scale, codes.ptr<uint8_t>(), nf4_device_tables());
    };
    if (transposed)
      launch(nf4_to_lowp_kernel<F, true>);
    else
      launch(nf4_to_lowp_kernel<F, false>);
    cuda::check_launch("nf4_to_lowp_kernel");
  });
}

}  // namespace loft
