// Quantize / dequantize kernels and the scale epilogue of the low-precision GEMM. The quantizer is
// two passes (docs/methods.md): a fused amax reduction, then one cast pass that derives the scale on the
// device (no host round trip), encodes with the same scalar encoders as the CPU (engine/quant/
// fp8.h, int8.h; x / s as __fdiv_rn, the IEEE division the CPU does) and, for the transposed copy,
// turns 32×32 tiles through shared memory.
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/quant/cuda/quant_device.cuh"
#include "engine/quant/cuda/quantize_cuda.h"

namespace loft::quant::cuda {

namespace {

using namespace loft::ops::cuda_kernels;

template <typename T>
__global__ void amax_kernel(const T* __restrict__ x, int64_t n, unsigned* __restrict__ amax_bits) {
  float m = 0.0f;  // fmaxf skips NaN
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (aligned16(x)) {
    const int64_t chunks = n / kChunk;
    for (int64_t c = i; c < chunks; c += stride) {
      float v[kChunk];
      load_chunk(x + c * kChunk, v);
#pragma unroll
      for (int k = 0; k < kChunk; ++k) m = fmaxf(m, fabsf(v[k]));
    }
    i += chunks * kChunk;
  }
  for (; i < n; i += stride) m = fmaxf(m, fabsf(to_f32(x[i])));
  block_amax(m, amax_bits);
}

template <typename T, LowpFormat F>
__global__ void cast_kernel(const T* __restrict__ x, int64_t n, const unsigned* __restrict__ amax_bits,
                            float qmax, uint8_t* __restrict__ codes, float* __restrict__ scale) {
  const float s = scale_from(amax_bits, qmax);
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale = s;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (aligned16(x) && (reinterpret_cast<uintptr_t>(codes) & 7u) == 0) {
    const int64_t chunks = n / kChunk;
    for (int64_t c = i; c < chunks; c += stride) {
      float v[kChunk];
      load_chunk(x + c * kChunk, v);
      alignas(8) uint8_t q[kChunk];
#pragma unroll
      for (int k = 0; k < kChunk; ++k) q[k] = encode<F>(__fdiv_rn(v[k], s));
      *reinterpret_cast<uint2*>(codes + c * kChunk) = *reinterpret_cast<const uint2*>(q);
    }
    i += chunks * kChunk;
  }
  for (; i < n; i += stride) codes[i] = encode<F>(__fdiv_rn(to_f32(x[i]), s));
}

constexpr int kTile = 32, kTileRows = 8;

// Block (32, 8) per 32×32 tile: codes row-major as x, codes_t [cols, rows] through shared memory
// so both writes run along rows.
template <typename T, LowpFormat F>
__global__ void cast_transpose_kernel(const T* __restrict__ x, int64_t rows, int64_t cols,
                                      const unsigned* __restrict__ amax_bits, float qmax,
                                      uint8_t* __restrict__ codes, uint8_t* __restrict__ codes_t,
                                      float* __restrict__ scale) {
  __shared__ uint8_t tile[kTile][kTile + 1];
  const float s = scale_from(amax_bits, qmax);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) *scale = s;
  const int64_t r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.x) * kTile;
#pragma unroll
  for (int j = 0; j < kTile; j += kTileRows) {
    const int64_t r = r0 + threadIdx.y + j, c = c0 + threadIdx.x;
    if (r < rows && c < cols) {
      const uint8_t q = encode<F>(__fdiv_rn(to_f32(x[r * cols + c]), s));
      codes[r * cols + c] = q;
      tile[threadIdx.y + j][threadIdx.x] = q;
    }
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kTile; j += kTileRows) {
    const int64_t c = c0 + threadIdx.y + j, r = r0 + threadIdx.x;
    if (r < rows && c < cols) codes_t[c * rows + r] = tile[threadIdx.x][threadIdx.y + j];
  }
}

constexpr int kVecTile = 64, kVecTileLd = kVecTile + 4;  // row pad: 17 words, fewer bank conflicts

// The fast transposed cast for rows and columns that are multiples of 8 (16-byte aligned x): a
// block of 256 threads per 64×64 tile; thread (ty = tid / 8, tx = tid % 8) encodes 8 consecutive
// elements of tile rows ty and ty + 32 (one 16-byte load, one 8-byte store of codes each), then
// writes 8 consecutive codes of codes_t rows ty and ty + 32 gathered from shared memory.
template <typename T, LowpFormat F>
__global__ void __launch_bounds__(256)
    cast_transpose_vec_kernel(const T* __restrict__ x, int64_t rows, int64_t cols,
                              const unsigned* __restrict__ amax_bits, float qmax,
                              uint8_t* __restrict__ codes, uint8_t* __restrict__ codes_t,
                              float* __restrict__ scale) {
  __shared__ alignas(16) uint8_t tile[kVecTile][kVecTileLd];
  const float s = scale_from(amax_bits, qmax);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *scale = s;
  const int tx = threadIdx.x & 7, ty = threadIdx.x >> 3;
  const int64_t r0 = int64_t(blockIdx.y) * kVecTile, c0 = int64_t(blockIdx.x) * kVecTile;
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    const int r = ty + 32 * p;
    const int64_t gr = r0 + r, gc = c0 + 8 * tx;
    alignas(8) uint8_t q[kChunk] = {};
    if (gr < rows && gc < cols) {  // cols % 8 == 0: the chunk is wholly inside
      float v[kChunk];
      load_chunk(x + gr * cols + gc, v);
#pragma unroll
      for (int k = 0; k < kChunk; ++k) q[k] = encode<F>(__fdiv_rn(v[k], s));
      *reinterpret_cast<uint2*>(codes + gr * cols + gc) = *reinterpret_cast<const uint2*>(q);
    }
    uint32_t* t = reinterpret_cast<uint32_t*>(&tile[r][8 * tx]);
    t[0] = reinterpret_cast<const uint32_t*>(q)[0];
    t[1] = reinterpret_cast<const uint32_t*>(q)[1];
  }
  __syncthreads();
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    const int c = ty + 32 * p, rb = 8 * tx;
    const int64_t gc = c0 + c, gr = r0 + rb;
    if (gc < cols && gr < rows) {  // rows % 8 == 0
      alignas(8) uint8_t q[kChunk];
#pragma unroll
      for (int k = 0; k < kChunk; ++k) q[k] = tile[rb + k][c];
      *reinterpret_cast<uint2*>(codes_t + gc * rows + gr) = *reinterpret_cast<const uint2*>(q);
    }
  }
}

template <LowpFormat F, typename T>
__global__ void dequantize_kernel(const uint8_t* __restrict__ codes, int64_t n,
                                  const float* __restrict__ scale, T* __restrict__ out) {
  const float s = scale ? *scale : 1.0f;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = from_f32<T>(__fmul_rn(decode<F>(codes[i]), s));
}

template <typename Acc, typename T>
__global__ void apply_scales_kernel(const Acc* __restrict__ acc, int64_t n,
                                    const float* __restrict__ sa, const float* __restrict__ sb,
                                    float alpha, float beta, T* __restrict__ c) {
  const float f = __fmul_rn(__fmul_rn(alpha, *sa), *sb);  // the CPU's (alpha·sa)·sb
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float p = __fmul_rn(float(acc[i]), f);
    c[i] = from_f32<T>(beta == 0.0f ? p : __fadd_rn(p, __fmul_rn(beta, to_f32(c[i]))));
  }
}

constexpr int kThreads = 256;

}  // namespace

void quantize(const Tensor& x, Tensor& codes, Tensor* codes_t, Tensor& scale,
              const Tensor* given_amax) {
  const int dev = use_device(x);
  cudaStream_t st = loft::cuda::stream(dev);
  const LowpFormat f = format_of(codes.dtype(), "quantize");
  const int64_t n = x.numel();
  // An F32 amax read as its bits (non-negative floats order like them: block_amax).
  Tensor amax = given_amax ? *given_amax : Tensor::empty({1}, DType::I32, x.device());
  if (!given_amax) LOFT_CUDA_CHECK(cudaMemsetAsync(amax.data(), 0, sizeof(unsigned), st));
  auto* amax_bits = amax.ptr<unsigned>();
  dispatch_activation(x.dtype(), "quantize", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.ptr<T>();
    if (n > 0 && !given_amax) {
      amax_kernel<T><<<grid_for(n / kChunk + 1, kThreads, dev), kThreads, 0, st>>>(xp, n, amax_bits);
      loft::cuda::check_launch("quant amax_kernel");
    }
    dispatch_format(f, [&](auto fc) {
      constexpr LowpFormat F = decltype(fc)::value;
      const bool codes8 = ((reinterpret_cast<uintptr_t>(codes.data()) |
                            reinterpret_cast<uintptr_t>(codes_t ? codes_t->data() : nullptr)) & 7u) == 0;
      if (codes_t && n > 0 && x.size(0) % kChunk == 0 && x.size(1) % kChunk == 0 && codes8 &&
          aligned16(xp)) {
        const int64_t rows = x.size(0), cols = x.size(1);
        const int64_t gy = (rows + kVecTile - 1) / kVecTile;
        LOFT_CHECK(gy <= 65535, "quantize: ", x.str(), " has too many rows for a transposed copy");
        const dim3 grid(unsigned((cols + kVecTile - 1) / kVecTile), unsigned(gy));
        cast_transpose_vec_kernel<T, F><<<grid, 256, 0, st>>>(
            xp, rows, cols, amax_bits, qmax(f), codes.ptr<uint8_t>(), codes_t->ptr<uint8_t>(),
            scale.ptr<float>());
        loft::cuda::check_launch("quant cast_transpose_vec_kernel");
      } else if (codes_t && n > 0) {
        const int64_t rows = x.size(0), cols = x.size(1);
        const int64_t gy = (rows + kTile - 1) / kTile;
        LOFT_CHECK(gy <= 65535, "quantize: ", x.str(), " has too many rows for a transposed copy");
        const dim3 grid(unsigned((cols + kTile - 1) / kTile), unsigned(gy));
        cast_transpose_kernel<T, F><<<grid, dim3(kTile, kTileRows), 0, st>>>(
            xp, rows, cols, amax_bits, qmax(f), codes.ptr<uint8_t>(), codes_t->ptr<uint8_t>(),
            scale.ptr<float>());
        loft::cuda::check_launch("quant cast_transpose_kernel");
      } else {  // n == 0 still writes the scale (1)
        cast_kernel<T, F><<<grid_for(n / kChunk + 1, kThreads, dev), kThreads, 0, st>>>(
            xp, n, amax_bits, qmax(f), codes.ptr<uint8_t>(), scale.ptr<float>());
        loft::cuda::check_launch("quant cast_kernel");
      }
    });
  });
}

void dequantize(const Tensor& codes, const Tensor* scale, Tensor& out) {
  const int dev = use_device(codes);
  const int64_t n = codes.numel();
  if (n == 0) return;
  const float* s = scale ? scale->ptr<float>() : nullptr;
  dispatch_format(format_of(codes.dtype(), "dequantize"), [&](auto fc) {
    constexpr LowpFormat F = decltype(fc)::value;
    dispatch_activation(out.dtype(), "dequantize", [&](auto tag) {
      using T = typename decltype(tag)::type;
      dequantize_kernel<F, T><<<grid_for(n, kThreads, dev), kThreads, 0, loft::cuda::stream(dev)>>>(
          codes.ptr<uint8_t>(), n, s, out.ptr<T>());
      loft::cuda::check_launch("dequantize_kernel");
    });
  });
}

void apply_scales(const Tensor& acc, const Tensor& sa, const Tensor& sb, float alpha, float beta,
                  Tensor& c) {
  const int dev = use_device(c);
  const int64_t n = c.numel();
  if (n == 0) return;
  LOFT_CHECK(acc.numel() == n && (acc.dtype() == DType::F32 || acc.dtype() == DType::I32),
             "gemm_lowp: accumulator ", acc.str(), " does not match C ", c.str());
  dispatch_activation(c.dtype(), "gemm_lowp", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const unsigned grid = grid_for(n, kThreads, dev);
    cudaStream_t st = loft::cuda::stream(dev);
    if (acc.dtype() == DType::F32)
      apply_scales_kernel<<<grid, kThreads, 0, st>>>(acc.ptr<float>(), n, sa.ptr<float>(),
                                                     sb.ptr<float>(), alpha, beta, c.ptr<T>());
    else
      apply_scales_kernel<<<grid, kThreads, 0, st>>>(acc.ptr<int32_t>(), n, sa.ptr<float>(),
                                                     sb.ptr<float>(), alpha, beta, c.ptr<T>());
    loft::cuda::check_launch("gemm_lowp apply_scales_kernel");
  });
}

}  // namespace loft::quant::cuda
