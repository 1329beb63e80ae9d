// HOT's quantizer kernels (hot_cuda.h). Each thread owns whole 16-element groups along `out`, so
// the FWHT16 runs in its registers with exactly the CPU's butterflies (hot_numerics.h): no shuffles
// are needed for the transform, only for the amax reductions, and those are order-free (max over
// bit patterns). The codes of one group are written with one 16-byte store. The dY quantizer is
// meant to run at memory speed: one read of dY, four Philox draws per group (one per quad), no
// conversion instructions in the stochastic rounding.
#include "engine/methods/hot/cuda/hot_cuda.h"
#include "engine/methods/hot/hot_numerics.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/quant/cuda/quantize_cuda.h"

namespace loft::quant::cuda {

namespace {

namespace hn = loft::quant::hot;
using hn::kGroup;
using ops::cuda_kernels::aligned16;
using ops::cuda_kernels::dispatch_activation;
using ops::cuda_kernels::from_f32;
using ops::cuda_kernels::grid_for;
using ops::cuda_kernels::kChunk;
using ops::cuda_kernels::to_f32;
using ops::cuda_kernels::use_device;

constexpr int kThreads = 256;

// Group g of a row of n values (zeros past n): two 16-byte chunk loads when `vec` (n a multiple of
// 8 and the base aligned) and the group is whole, else element by element.
template <typename T>
__device__ __forceinline__ void load_group(const T* row, int64_t n, int64_t g, bool vec,
                                           float (&v)[kGroup]) {
  const int64_t o0 = g * kGroup;
  if (vec && o0 + kGroup <= n) {
    float a[kChunk], b[kChunk];
    ops::cuda_kernels::load_chunk(row + o0, a);
    ops::cuda_kernels::load_chunk(row + o0 + kChunk, b);
#pragma unroll
    for (int j = 0; j < kChunk; ++j) v[j] = a[j], v[kChunk + j] = b[j];
    return;
  }
#pragma unroll
  for (int j = 0; j < kGroup; ++j) v[j] = o0 + j < n ? to_f32(row[o0 + j]) : 0.0f;
}

__device__ __forceinline__ uint32_t group_amax(const float (&v)[kGroup]) {
  uint32_t m = 0;
#pragma unroll
  for (int j = 0; j < kGroup; ++j) m = max(m, hn::abs_bits(v[j]));
  return m;
}

// Max over the block (blockDim.x a multiple of 32), returned to every thread.
__device__ __forceinline__ uint32_t block_max(uint32_t m) {
  __shared__ uint32_t scratch[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = m;
  __syncthreads();
  if (warp == 0) {
    m = lane < int(blockDim.x >> 5) ? scratch[lane] : 0u;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) scratch[0] = m;
  }
  __syncthreads();
  return scratch[0];
}

__device__ __forceinline__ void store_codes(int8_t* dst, const int8_t (&q)[kGroup]) {
  uint4 u;
  memcpy(&u, q, sizeof u);
  *reinterpret_cast<uint4*>(dst) = u;
}

struct DyArgs {
  int64_t rows, n, kp;
  int block;
  bool vec;
  float qmax;
  bool sr;
  uint64_t seed;
  uint32_t step, site;
};

// The per-tensor amax: every (row, group) of dY rotated once.
template <typename T>
__global__ void dy_amax_kernel(const T* dy, DyArgs a, uint32_t* amax) {
  const int64_t groups = (a.n + kGroup - 1) / kGroup, work = a.rows * groups;
  uint32_t m = 0;
  for (int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < work;
       w += int64_t(gridDim.x) * blockDim.x) {
    float v[kGroup];
    load_group(dy + (w / groups) * a.n, a.n, w % groups, a.vec, v);
    hn::fwht_group(v, a.block);
    m = max(m, group_amax(v));
  }
  m = block_max(m);
  if (threadIdx.x == 0) atomicMax(amax, m);
}

// sr_code (hot_numerics.h) without conversion instructions, which issue at a fraction of the FP32
// rate and would bound the quantizer: identical results for |v| < 2^22 (here |v| ≤ qmax + 1 ulp).
// floor(m) and trunc(y) come from adding 2^23 (ulp 1 there) rounded down / toward zero.
__device__ __forceinline__ int32_t sr_code_fast(float v, uint32_t u24, int32_t qmax) {
  constexpr float kMagic = 8388608.0f;  // 2^23
  constexpr uint32_t kMagicBits = 0x4B000000u;
  const float m = fabsf(v);
  const float fl_m = __fadd_rd(m, kMagic);                 // 2^23 + floor(m), exact
  const int32_t fl = int32_t(__float_as_uint(fl_m) - kMagicBits);
  const float f = m - (fl_m - kMagic);                     // frac(m), exact
  const float y = hn::mul_rn(f, 16777216.0f);              // exact, in [0, 2^24)
  // trunc(y): below 2^23 via 2^23 + y rounded toward zero; from 2^23 on y is an integer already.
  const uint32_t thr = y < kMagic ? __float_as_uint(__fadd_rz(y, kMagic)) - kMagicBits
                                  : __float_as_uint(y) - (kMagicBits - 0x800000u);
  const int32_t q = min(fl + int32_t(u24 < thr), qmax);
  return v < 0.0f ? -q : q;
}

// The codes of one rotated 16-group whose first code has index `base` in the codes tensor (a
// multiple of 16: rows are k_padded long). Stochastic rounding takes one Philox draw per aligned
// quad and all four of its words, with no per-element branch; the bits are hot::dy_code's.
__device__ __forceinline__ void encode_group(const float (&v)[kGroup], hn::Step st, const DyArgs& a,
                                             uint64_t base, int8_t (&q)[kGroup]) {
  if (!a.sr) {
#pragma unroll
    for (int j = 0; j < kGroup; ++j) q[j] = int8_t(hn::rne_code(hn::to_code_units(v[j], st), a.qmax));
    return;
  }
  const int32_t qmax = int32_t(a.qmax);
#pragma unroll
  for (int k = 0; k < kGroup / 4; ++k) {
    const philox::Words w = hn::sr_draw(a.seed, (base >> 2) + k, a.step, a.site);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      q[4 * k + j] = int8_t(sr_code_fast(hn::to_code_units(v[4 * k + j], st), w.w[j] >> 8, qmax));
  }
}

// Groups of a row a thread keeps in registers between the amax and the codes: a row of up to
// kHeld·1024 groups (out ≤ 65,536) is read from memory once; past that the rest is read again.
constexpr int kHeld = 4;

// Threads for one row of `groups` 16-groups: kHeld groups each, a multiple of 32, at most 1024.
int row_threads_for(int64_t groups) {
  const int64_t t = (groups + kHeld - 1) / kHeld;
  return int(std::clamp<int64_t>((t + 31) / 32 * 32, 32, 1024));
}

// One block per padded row: the row's groups loaded (16-byte loads), rotated and kept in registers,
// the row's amax (unless tensor_amax is given), then the codes, one 16-byte store per group.
template <typename T>
__global__ void dy_codes_kernel(const T* dy, DyArgs a, const uint32_t* tensor_amax, int8_t* codes,
                                float* scale, int32_t* overflow) {
  const int64_t t = blockIdx.x, groups = a.kp / kGroup, live = (a.n + kGroup - 1) / kGroup;
  const int64_t tid = threadIdx.x, stride = blockDim.x;
  int8_t* crow = codes + t * a.kp;
  if (t >= a.rows) {  // padding row
    const int8_t zero[kGroup] = {};
    for (int64_t g = tid; g < groups; g += stride) store_codes(crow + g * kGroup, zero);
    if (tid == 0) scale[t] = 0.0f;
    return;
  }
  const T* row = dy + t * a.n;
  float held[kHeld][kGroup];
  uint32_t m = 0;
#pragma unroll
  for (int h = 0; h < kHeld; ++h) {
    const int64_t g = tid + h * stride;
    if (g < live) {
      load_group(row, a.n, g, a.vec, held[h]);
      hn::fwht_group(held[h], a.block);
      m = max(m, group_amax(held[h]));
    } else {
#pragma unroll
      for (int j = 0; j < kGroup; ++j) held[h][j] = 0.0f;  // K padding: codes 0
    }
  }
  if (!tensor_amax)  // groups past the held ones (rows over 65,536): amax now, codes below
    for (int64_t g = tid + kHeld * stride; g < live; g += stride) {
      float v[kGroup];
      load_group(row, a.n, g, a.vec, v);
      hn::fwht_group(v, a.block);
      m = max(m, group_amax(v));
    }
  const uint32_t amax = tensor_amax ? *tensor_amax : block_max(m);
  const hn::Step st = hn::step_for(amax, a.qmax);
  if (tid == 0) {
    scale[t] = st.s;
    if (overflow && amax >= hn::kInfBits) *overflow = 1;
  }
  const uint64_t row_base = uint64_t(t) * uint64_t(a.kp);
#pragma unroll
  for (int h = 0; h < kHeld; ++h) {
    const int64_t g = tid + h * stride;
    if (g < groups) {
      int8_t q[kGroup];
      encode_group(held[h], st, a, row_base + uint64_t(g * kGroup), q);
      store_codes(crow + g * kGroup, q);
    }
  }
  for (int64_t g = tid + kHeld * stride; g < groups; g += stride) {
    float v[kGroup] = {};
    if (g < live) {
      load_group(row, a.n, g, a.vec, v);
      hn::fwht_group(v, a.block);
    }
    int8_t q[kGroup];
    encode_group(v, st, a, row_base + uint64_t(g * kGroup), q);
    store_codes(crow + g * kGroup, q);
  }
}

// 16-row strip s of column i of W [out, in], rotated (zeros past out).
template <typename T>
__device__ __forceinline__ void load_strip(const T* w, int64_t out, int64_t in, int64_t i, int64_t s,
                                           int block, float (&v)[kGroup]) {
#pragma unroll
  for (int j = 0; j < kGroup; ++j) {
    const int64_t o = s * kGroup + j;
    v[j] = o < out ? to_f32(w[o * in + i]) : 0.0f;
  }
  hn::fwht_group(v, block);
}

template <typename T>
__global__ void w_amax_kernel(const T* w, int64_t out, int64_t in, int block, uint32_t* colmax) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= in) return;
  float v[kGroup];
  load_strip(w, out, in, i, blockIdx.y, block, v);
  atomicMax(colmax + i, group_amax(v));
}

template <typename T>
__global__ void w_codes_kernel(const T* w, int64_t out, int64_t in, int64_t kp, int block, float qmax,
                               const uint32_t* colmax, int8_t* codes, float* scale) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= in) return;
  float v[kGroup];
  load_strip(w, out, in, i, blockIdx.y, block, v);
  const hn::Step st = hn::step_for(colmax[i], qmax);
  if (blockIdx.y == 0) scale[i] = st.s;
  int8_t q[kGroup];
#pragma unroll
  for (int j = 0; j < kGroup; ++j) q[j] = int8_t(hn::rne_code(hn::to_code_units(v[j], st), qmax));
  store_codes(codes + i * kp + int64_t(blockIdx.y) * kGroup, q);
}

template <typename T>
__global__ void rotate_rows_kernel(const T* dy, int64_t rows, int64_t n, int block, bool vec,
                                   float* z) {
  const int64_t groups = (n + kGroup - 1) / kGroup, work = rows * groups;
  for (int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < work;
       w += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = w / groups, g = w % groups;
    float v[kGroup];
    load_group(dy + t * n, n, g, vec, v);
    hn::fwht_group(v, block);
#pragma unroll
    for (int j = 0; j < kGroup; ++j)
      if (g * kGroup + j < n) z[t * n + g * kGroup + j] = v[j];
  }
}

// 16 codes -> 8 bytes, low nibble first.
__global__ void pack_s4_kernel(const int8_t* codes, int64_t groups, uint8_t* packed) {
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;
       g += int64_t(gridDim.x) * blockDim.x) {
    const uint4 u = reinterpret_cast<const uint4*>(codes)[g];
    const uint8_t* c = reinterpret_cast<const uint8_t*>(&u);
    uint8_t p[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) p[j] = uint8_t((c[2 * j] & 0xfu) | ((c[2 * j + 1] & 0xfu) << 4));
    uint2 o;
    memcpy(&o, p, sizeof o);
    reinterpret_cast<uint2*>(packed)[g] = o;
  }
}

// kPer consecutive values from p: 16-byte loads when kPer is a chunk (the caller checked alignment).
template <int kPer>
__device__ __forceinline__ void load_acc(const int32_t* p, int32_t (&c)[kPer]) {
  if constexpr (kPer == kChunk) {
    const int4 x = reinterpret_cast<const int4*>(p)[0], y = reinterpret_cast<const int4*>(p)[1];
    c[0] = x.x, c[1] = x.y, c[2] = x.z, c[3] = x.w, c[4] = y.x, c[5] = y.y, c[6] = y.z, c[7] = y.w;
  } else {
#pragma unroll
    for (int j = 0; j < kPer; ++j) c[j] = p[j];
  }
}
template <int kPer, typename T>
__device__ __forceinline__ void load_vals(const T* p, float (&v)[kPer]) {
  if constexpr (kPer == kChunk) {
    ops::cuda_kernels::load_chunk(p, v);
  } else {
#pragma unroll
    for (int j = 0; j < kPer; ++j) v[j] = to_f32(p[j]);
  }
}
template <int kPer, typename T>
__device__ __forceinline__ void store_vals(T* p, const float (&v)[kPer]) {
  if constexpr (kPer == kChunk) {
    ops::cuda_kernels::store_chunk(p, v);
  } else {
#pragma unroll
    for (int j = 0; j < kPer; ++j) p[j] = from_f32<T>(v[j]);
  }
}

// dx from the int32 products: a thread takes kPer consecutive columns (kPer = 8: 16-byte accesses
// to acc, s_w, dx_lora and dx; 1 where a row or pointer is not aligned for them) of the rows
// blockIdx.y, + gridDim.y, ... (about four; grid y is capped at 65,535). One read of acc, one write
// of dx (and one read of it when accumulating): memory-bound.
template <typename T, int kPer>
__global__ void epilogue_kernel(const int32_t* acc, int64_t ld, const float* s_t, const float* s_w,
                                float inv_block, const float* lora, T* dx, int64_t rows,
                                int64_t cols, bool accumulate) {
  const int64_t i0 = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kPer;
  if (i0 >= cols) return;
  float sw[kPer];
  load_vals<kPer>(s_w + i0, sw);
  for (int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
    int32_t c[kPer];
    load_acc<kPer>(acc + t * ld + i0, c);
    const float st = s_t[t];
    float v[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) v[j] = hn::dx_base(c[j], st, sw[j], inv_block);
    T* out = dx + t * cols + i0;
    if (lora) {
      float l[kPer];
      load_vals<kPer>(lora + t * cols + i0, l);
#pragma unroll
      for (int j = 0; j < kPer; ++j) v[j] = hn::add_rn(v[j], l[j]);
    }
    if (accumulate) {
      float d[kPer];
      load_vals<kPer>(out, d);
#pragma unroll
      for (int j = 0; j < kPer; ++j) v[j] = hn::add_rn(d[j], v[j]);
    }
    store_vals<kPer>(out, v);
  }
}

__global__ void sq_error_kernel(const float* z, int64_t rows, int64_t cols, const int8_t* codes,
                                int64_t kp, const float* scale, double* sum) {
  double s = 0.0;
  const int64_t n = rows * cols;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / cols, o = e % cols;
    const double d = double(z[e]) - double(hn::mul_rn(float(codes[t * kp + o]), scale[t]));
    s += d * d;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(sum, s);
}

bool vec_ok(const Tensor& x) { return x.size(1) % kChunk == 0 && aligned16(x.data()); }

}  // namespace

void hot_quantize_dy(const Tensor& dy, const HotQuantOptions& opt, HotCodes& out, Tensor* overflow) {
  const int dev = use_device(dy);
  cudaStream_t st = loft::cuda::stream(dev);
  const DyArgs a{dy.size(0),           dy.size(1), out.k_padded(), out.block,
                 vec_ok(dy),           hn::qmax_for(opt.bits),
                 opt.round == HotRound::Stochastic,
                 opt.seed,             opt.step,   opt.site};
  Tensor amax;
  if (opt.scale == HotScale::PerTensor) amax = Tensor::zeros({1}, DType::I32, dy.device());
  int32_t* flag = overflow ? overflow->ptr<int32_t>() : nullptr;
  dispatch_activation(dy.dtype(), "hot_quantize_dy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (amax.defined() && dy.numel() > 0) {
      dy_amax_kernel<T><<<grid_for(a.rows * ((a.n + kGroup - 1) / kGroup), kThreads, dev), kThreads,
                          0, st>>>(dy.ptr<T>(), a, amax.ptr<uint32_t>());
      loft::cuda::check_launch("hot dy_amax_kernel");
    }
    const int threads = row_threads_for(a.kp / kGroup);
    dy_codes_kernel<T><<<unsigned(out.rows_padded()), threads, 0, st>>>(
        dy.ptr<T>(), a, amax.defined() ? amax.ptr<uint32_t>() : nullptr, out.codes.ptr<int8_t>(),
        out.scale.ptr<float>(), flag);
    loft::cuda::check_launch("hot dy_codes_kernel");
  });
}

void hot_weight_codes(const Tensor& w, HotCodes& out) {
  const int dev = use_device(w);
  cudaStream_t st = loft::cuda::stream(dev);
  const int64_t n_out = w.size(0), in = w.size(1), strips = (n_out + kGroup - 1) / kGroup;
  LOFT_CHECK(strips <= 65535, "hot_weight_codes: W ", w.str(), " has too many rows");
  if (in == 0) return;
  Tensor colmax = Tensor::zeros({in}, DType::I32, w.device());
  const dim3 grid(unsigned((in + 127) / 128), unsigned(strips));
  dispatch_activation(w.dtype(), "hot_weight_codes", [&](auto tag) {
    using T = typename decltype(tag)::type;
    w_amax_kernel<T><<<grid, 128, 0, st>>>(w.ptr<T>(), n_out, in, out.block,
                                           colmax.ptr<uint32_t>());
    loft::cuda::check_launch("hot w_amax_kernel");
    w_codes_kernel<T><<<grid, 128, 0, st>>>(w.ptr<T>(), n_out, in, out.k_padded(), out.block,
                                            hn::qmax_for(out.bits), colmax.ptr<uint32_t>(),
                                            out.codes.ptr<int8_t>(), out.scale.ptr<float>());
    loft::cuda::check_launch("hot w_codes_kernel");
  });
}

void hot_rotate_rows(const Tensor& dy, Tensor& z) {
  const int dev = use_device(dy);
  const int64_t rows = dy.size(0), n = dy.size(1);
  if (rows == 0) return;
  dispatch_activation(dy.dtype(), "hot_rotate_rows", [&](auto tag) {
    using T = typename decltype(tag)::type;
    rotate_rows_kernel<T><<<grid_for(rows * ((n + kGroup - 1) / kGroup), kThreads, dev), kThreads, 0,
                            loft::cuda::stream(dev)>>>(dy.ptr<T>(), rows, n, hn::hadamard_block(n),
                                                       vec_ok(dy), z.ptr<float>());
    loft::cuda::check_launch("hot rotate_rows_kernel");
  });
}

void hot_pack_s4(const Tensor& codes, Tensor& packed) {
  const int dev = use_device(codes);
  LOFT_CHECK(codes.size(1) % kGroup == 0 && aligned16(codes.data()),
             "hot_pack_s4: CUDA codes need rows of a multiple of 16 codes, 16-byte aligned, got ",
             codes.str());
  const int64_t groups = codes.numel() / kGroup;
  if (groups == 0) return;
  pack_s4_kernel<<<grid_for(groups, kThreads, dev), kThreads, 0, loft::cuda::stream(dev)>>>(
      codes.ptr<int8_t>(), groups, packed.ptr<uint8_t>());
  loft::cuda::check_launch("hot pack_s4_kernel");
}

void hot_epilogue(const Tensor& acc, const Tensor& s_t, const Tensor& s_w, float inv_block,
                  const Tensor* dx_lora, Tensor& dx, bool accumulate) {
  const int dev = use_device(dx);
  const int64_t rows = dx.size(0), cols = dx.size(1), ld = acc.size(1);
  const float* lora = dx_lora ? dx_lora->ptr<float>() : nullptr;
  const bool vec = cols % kChunk == 0 && ld % 4 == 0 && aligned16(acc.data()) &&
                   aligned16(s_w.data()) && aligned16(dx.data()) && (!lora || aligned16(lora));
  dispatch_activation(dx.dtype(), "hot_epilogue", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto launch = [&](auto kernel, int64_t per) {
      constexpr int threads = 128;
      // About four rows a thread: s_w's chunk is loaded once for them.
      const dim3 grid(unsigned((cols / per + threads - 1) / threads),
                      unsigned(std::min<int64_t>((rows + 3) / 4, 65535)));
      kernel<<<grid, threads, 0, loft::cuda::stream(dev)>>>(
          acc.ptr<int32_t>(), ld, s_t.ptr<float>(), s_w.ptr<float>(), inv_block, lora, dx.ptr<T>(),
          rows, cols, accumulate);
    };
    if (vec)
      launch(epilogue_kernel<T, kChunk>, kChunk);
    else
      launch(epilogue_kernel<T, 1>, 1);
    loft::cuda::check_launch("hot epilogue_kernel");
  });
}

double hot_squared_error(const Tensor& z, const Tensor& codes, const Tensor& scale) {
  const int dev = use_device(z);
  cudaStream_t st = loft::cuda::stream(dev);
  Tensor sum = Tensor::zeros({1}, DType::I64, z.device());  // 8 bytes: one double
  if (z.numel() > 0) {
    sq_error_kernel<<<grid_for(z.numel(), kThreads, dev), kThreads, 0, st>>>(
        z.ptr<float>(), z.size(0), z.size(1), codes.ptr<int8_t>(), codes.size(1),
        scale.ptr<float>(), sum.ptr<double>());
    loft::cuda::check_launch("hot sq_error_kernel");
  }
  double host = 0.0;
  LOFT_CUDA_CHECK(cudaMemcpyAsync(&host, sum.data(), sizeof host, cudaMemcpyDeviceToHost, st));
  LOFT_CUDA_CHECK(cudaStreamSynchronize(st));
  return host;
}

bool hot_igemm_cublaslt(const Tensor& a, const Tensor& b, Tensor& acc) { return igemm_i32(a, b, acc); }

}  // namespace loft::quant::cuda
