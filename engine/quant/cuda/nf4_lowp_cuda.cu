// NF4-DQ -> FP8/INT8 codes (HALO's NF4 backbone, decoded per GEMM). Every element of an NF4
// block of 64 is level[c]·absmax' for one of 16 codes c, so its output code is one of 16 bytes:
// encode(__fdiv_rn(__fmul_rn(level[c], absmax'), s)) with absmax' = __fmaf_rn(map[..], scale,
// offset), the arithmetic of dequantize_nf4 to F32 followed by the CPU's scalar encoder. The
// kernels compute those 16 bytes once per block (not one division per element) and look each
// element up with byte permutes, 16 elements (8 bytes of NF4 codes) per thread:
//   plain       4 consecutive threads share a block, each computes 4 of its 16 bytes; 8-byte
//               loads, 16-byte stores, whole warps on consecutive memory;
//   transposed  (cols % 64 == 0, rows % 4 == 0: every Llama projection) a thread decodes 4 rows
//               × 16 columns, turns the 4×4 byte squares in registers and stores 4 rows of the
//               transpose as one word per output row; the 4 threads of a quad (same rows, 64
//               columns = one block per row) each compute one row's table.
// Other transposed shapes or misaligned pointers take a 32×32 tile kernel that decodes element
// by element. All give the CPU reference's bytes.
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/quant/cuda/nf4_cuda.h"
#include "engine/quant/cuda/nf4_tables.cuh"
#include "engine/quant/cuda/quant_device.cuh"

namespace loft {

namespace {

using quant::LowpFormat;

constexpr int kThreads = 256;
constexpr int kTRows = 256;  // weight rows per block of the transposed kernel (8 warps × 32)
constexpr int kTile = 32, kTileRows = 8;

// The NF4 weight's device arrays (Nf4Tensor's), as every kernel reads them.
struct Nf4In {
  const uint8_t* __restrict__ codes;
  const uint8_t* __restrict__ absmax_codes;
  const float* __restrict__ scales;
  float offset;
};

// The levels and the dynamic map into shared memory (the absmax lookups are data dependent).
__device__ __forceinline__ void stage_tables(const Nf4Tables& tab, float* levels, float* map) {
  const int tid = threadIdx.y * blockDim.x + threadIdx.x, n = blockDim.x * blockDim.y;
  for (int k = tid; k < 256; k += n) map[k] = tab.map[k];
  if (tid < 16) levels[tid] = tab.levels[tid];
  __syncthreads();
}

// absmax' of NF4 block b, as dequantize_nf4 decodes it.
__device__ __forceinline__ float block_absmax(const Nf4In& q, const float* map, int64_t b) {
  return __fmaf_rn(map[q.absmax_codes[b]], q.scales[b / kNf4AbsmaxGroup], q.offset);
}

// Output codes of levels c0..c0+3 in a block with absmax' a, byte j = level c0 + j.
template <LowpFormat F>
__device__ __forceinline__ uint32_t code_word(const float* levels, int c0, float a, float s) {
  uint32_t w = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j)
    w |= uint32_t(quant::cuda::encode<F>(__fdiv_rn(__fmul_rn(levels[c0 + j], a), s))) << (8 * j);
  return w;
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

// The 8 NF4 codes of w (byte j: element 2j in the high nibble, 2j + 1 in the low one) looked up
// in table t (byte c of the 16 = the code of level c): byte i of the result is element i's.
__device__ __forceinline__ uint2 lookup8(uint32_t w, const uint4& t) {
  const uint32_t sel = ((w >> 4) & 0x0F0F0F0Fu) | ((w << 4) & 0xF0F0F0F0u);  // nibble i: element i
  const uint32_t idx = sel & 0x77777777u;  // entry within its half of the table
  // Nibble 12 (byte 4, sign replicated: 0xFF) where the entry is in the upper half, else 0.
  const uint32_t upper = (sel & 0x88888888u) | ((sel >> 1) & 0x44444444u);
  uint2 r;
  uint32_t m = prmt(0u, 0x80u, upper);
  r.x = (prmt(t.x, t.y, idx) & ~m) | (prmt(t.z, t.w, idx) & m);
  m = prmt(0u, 0x80u, upper >> 16);
  r.y = (prmt(t.x, t.y, idx >> 16) & ~m) | (prmt(t.z, t.w, idx >> 16) & m);
  return r;
}

// Plain: thread i decodes elements 16i..16i+15 (all in block i / 4). `vec`: codes 8-byte and out
// 16-byte aligned; otherwise, and for the last partial 16, bytes one at a time.
template <LowpFormat F>
__global__ void __launch_bounds__(kThreads) nf4_to_lowp_plain(Nf4In q, int64_t numel, float s, bool vec,
                                                              uint8_t* __restrict__ out,
                                                              const __grid_constant__ Nf4Tables tab) {
  __shared__ float levels[16], map[256];
  __shared__ uint4 tables[kThreads / 4];
  stage_tables(tab, levels, map);
  const int tid = threadIdx.x;
  const int64_t e0 = (int64_t(blockIdx.x) * kThreads + tid) * 16;
  const int64_t last_block = (numel - 1) / kNf4BlockSize;  // quads past the end compute a real one
  const float a = block_absmax(q, map, min(e0 / kNf4BlockSize, last_block));
  reinterpret_cast<uint32_t*>(tables)[tid] = code_word<F>(levels, 4 * (tid & 3), a, s);
  __syncwarp();
  const uint4 t = tables[tid >> 2];
  if (e0 >= numel) return;
  const bool whole = vec && e0 + 16 <= numel;
  uint2 cw = make_uint2(0u, 0u);
  if (whole) {
    cw = *reinterpret_cast<const uint2*>(q.codes + e0 / 2);
  } else {
    const int64_t bytes = (numel + 1) / 2;
    for (int j = 0; j < 8 && e0 / 2 + j < bytes; ++j)
      (j < 4 ? cw.x : cw.y) |= uint32_t(q.codes[e0 / 2 + j]) << (8 * (j & 3));
  }
  const uint2 lo = lookup8(cw.x, t), hi = lookup8(cw.y, t);
  if (whole) {
    *reinterpret_cast<uint4*>(out + e0) = make_uint4(lo.x, lo.y, hi.x, hi.y);
  } else {
    const uint32_t words[4] = {lo.x, lo.y, hi.x, hi.y};
    for (int j = 0; j < 16 && e0 + j < numel; ++j) out[e0 + j] = uint8_t(words[j >> 2] >> (8 * (j & 3)));
  }
}

// Transposed, cols % 64 == 0 and rows % 4 == 0: warp w of block (bx, by) takes rows by·256 +
// 32w .. +31 and columns bx·64 .. +63; lane = 4·(row group) + (column group of 16).
template <LowpFormat F>
__global__ void __launch_bounds__(kThreads) nf4_to_lowp_t64(Nf4In q, int64_t rows, int64_t cols, float s,
                                                            uint8_t* __restrict__ out,
                                                            const __grid_constant__ Nf4Tables tab) {
  __shared__ float levels[16], map[256];
  __shared__ uint4 tables[kThreads / 32][4][8];  // [warp][row of the group][row group]
  stage_tables(tab, levels, map);
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, cg = lane & 3, rg = lane >> 2;
  const int64_t r0 = int64_t(blockIdx.y) * kTRows + w * 32 + rg * 4;
  const int64_t c0 = int64_t(blockIdx.x) * 64 + cg * 16;
  // Lane cg of the quad computes the table of row r0 + cg (its 64 columns are one NF4 block).
  const int64_t b = min(r0 + cg, rows - 1) * (cols / 64) + blockIdx.x;
  const float a = block_absmax(q, map, b);
  tables[w][cg][rg] = make_uint4(code_word<F>(levels, 0, a, s), code_word<F>(levels, 4, a, s),
                                 code_word<F>(levels, 8, a, s), code_word<F>(levels, 12, a, s));
  __syncwarp();
  if (r0 >= rows) return;  // rows % 4 == 0: a group of 4 rows is wholly in or out
  uint32_t d[4][4];        // [row j][word q]: columns c0 + 4q .. +3 of row r0 + j
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint2 cw = *reinterpret_cast<const uint2*>(q.codes + ((r0 + j) * cols + c0) / 2);
    const uint4 t = tables[w][j][rg];
    const uint2 lo = lookup8(cw.x, t), hi = lookup8(cw.y, t);
    d[j][0] = lo.x, d[j][1] = lo.y, d[j][2] = hi.x, d[j][3] = hi.y;
  }
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    // The 4×4 square (rows j, columns 4q + i) turned: word i = column 4q + i of rows 0..3.
    const uint32_t t0 = prmt(d[0][q], d[1][q], 0x5140), t1 = prmt(d[2][q], d[3][q], 0x5140);
    const uint32_t t2 = prmt(d[0][q], d[1][q], 0x7362), t3 = prmt(d[2][q], d[3][q], 0x7362);
    const uint32_t col[4] = {prmt(t0, t1, 0x5410), prmt(t0, t1, 0x7632), prmt(t2, t3, 0x5410),
                             prmt(t2, t3, 0x7632)};
#pragma unroll
    for (int i = 0; i < 4; ++i) *reinterpret_cast<uint32_t*>(out + (c0 + 4 * q + i) * rows + r0) = col[i];
  }
}

// Transposed, any shape: block (32, 8) per 32×32 tile, element by element, turned through
// shared memory so both the code reads and the writes run along rows.
template <LowpFormat F>
__global__ void nf4_to_lowp_tile(Nf4In q, int64_t rows, int64_t cols, float s,
                                 uint8_t* __restrict__ out, const __grid_constant__ Nf4Tables tab) {
  __shared__ float levels[16], map[256];
  __shared__ uint8_t tile[kTile][kTile + 1];
  stage_tables(tab, levels, map);
  const int64_t r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.x) * kTile;
#pragma unroll
  for (int j = 0; j < kTile; j += kTileRows) {
    const int64_t r = r0 + threadIdx.y + j, c = c0 + threadIdx.x;
    if (r < rows && c < cols) {
      const int64_t e = r * cols + c;
      const uint8_t byte = q.codes[e / 2];
      const int code = (e % 2 == 0) ? (byte >> 4) : (byte & 15);
      const float a = block_absmax(q, map, e / kNf4BlockSize);
      tile[threadIdx.y + j][threadIdx.x] = quant::cuda::encode<F>(__fdiv_rn(__fmul_rn(levels[code], a), s));
    }
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kTile; j += kTileRows) {
    const int64_t c = c0 + threadIdx.y + j, r = r0 + threadIdx.x;
    if (r < rows && c < cols) out[c * rows + r] = tile[threadIdx.x][threadIdx.y + j];
  }
}

// nf4_max_abs: thread i takes NF4 block i (64 elements, 32 bytes of codes), notes which of the 16
// codes it holds, and keeps |max level · absmax'| (the CPU's product; a NaN drops out as in its
// fmax); the block's max reaches `out` (zeroed, non-negative floats order as their bits) by one
// atomicMax on the bits.
__global__ void __launch_bounds__(kThreads) nf4_max_abs_kernel(Nf4In q, int64_t numel, unsigned* out,
                                                               const __grid_constant__ Nf4Tables tab) {
  __shared__ float levels[16], map[256];
  stage_tables(tab, levels, map);
  const int64_t b = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  float m = 0.0f;
  if (b * kNf4BlockSize < numel) {
    const int64_t lo = b * kNf4BlockSize, hi = min(numel, lo + kNf4BlockSize);
    unsigned seen = 0;  // bit c: code c occurs in the block
    for (int64_t e = lo; e < hi; e += 2) {
      const uint8_t byte = q.codes[e / 2];
      seen |= 1u << (byte >> 4);
      if (e + 1 < hi) seen |= 1u << (byte & 15);
    }
    float level = 0.0f;
    for (int c = 0; c < 16; ++c)
      if (seen & (1u << c)) level = fmaxf(level, fabsf(levels[c]));
    m = fmaxf(0.0f, fabsf(__fmul_rn(level, block_absmax(q, map, b))));
  }
  for (int d = 16; d > 0; d >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
  if ((threadIdx.x & 31) == 0) atomicMax(out, __float_as_uint(m));
}

bool aligned(const void* p, uintptr_t bytes) { return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0; }

}  // namespace

void nf4_to_lowp_cuda(const Nf4Tensor& q, float scale, bool transposed, Tensor& codes) {
  const int dev = ops::cuda_kernels::use_device(codes);
  const int64_t rows = q.shape[0], cols = q.shape[1], numel = rows * cols;
  if (rows == 0 || cols == 0) return;
  const Nf4In nf4{q.codes.ptr<uint8_t>(), q.absmax_codes.ptr<uint8_t>(), q.absmax_scale.ptr<float>(),
                  q.absmax_offset};
  const uint8_t* in = nf4.codes;
  uint8_t* out = codes.ptr<uint8_t>();
  const cudaStream_t stream = cuda::stream(dev);
  quant::cuda::dispatch_format(quant::format_of(codes.dtype(), "nf4_to_lowp"), [&](auto fc) {
    constexpr LowpFormat F = decltype(fc)::value;
    const auto args = [&](auto kernel, dim3 grid, dim3 block, auto... shape) {
      kernel<<<grid, block, 0, stream>>>(nf4, shape..., out, nf4_device_tables());
    };
    if (!transposed) {
      const int64_t blocks = (numel + 16 * kThreads - 1) / (16 * kThreads);
      LOFT_CHECK(blocks <= 0x7fffffff, "nf4_to_lowp: ", shape_str(q.shape), " is too large for one launch");
      const bool vec = aligned(in, 8) && aligned(out, 16);
      args(nf4_to_lowp_plain<F>, dim3(unsigned(blocks)), dim3(kThreads), numel, scale, vec);
    } else if (cols % 64 == 0 && rows % 4 == 0 && aligned(in, 8) && aligned(out, 4)) {
      const int64_t gy = (rows + kTRows - 1) / kTRows;
      LOFT_CHECK(gy <= 65535, "nf4_to_lowp: ", shape_str(q.shape), " has too many rows for one launch");
      args(nf4_to_lowp_t64<F>, dim3(unsigned(cols / 64), unsigned(gy)), dim3(kThreads), rows, cols, scale);
    } else {
      const int64_t gy = (rows + kTile - 1) / kTile;
      LOFT_CHECK(gy <= 65535, "nf4_to_lowp: ", shape_str(q.shape), " has too many rows for one launch");
      args(nf4_to_lowp_tile<F>, dim3(unsigned((cols + kTile - 1) / kTile), unsigned(gy)),
           dim3(kTile, kTileRows), rows, cols, scale);
    }
    cuda::check_launch("nf4_to_lowp");
  });
}

float nf4_max_abs_cuda(const Nf4Tensor& q) {
  const int dev = ops::cuda_kernels::use_device(q.codes);
  const int64_t numel = q.numel();
  Tensor out = Tensor::zeros({1}, DType::F32, q.device());  // written as its bits
  if (numel > 0) {
    const int64_t grid = (q.n_blocks() + kThreads - 1) / kThreads;
    LOFT_CHECK(grid <= 0x7fffffff, "nf4_max_abs: ", shape_str(q.shape), " is too large for one launch");
    const Nf4In nf4{q.codes.ptr<uint8_t>(), q.absmax_codes.ptr<uint8_t>(), q.absmax_scale.ptr<float>(),
                    q.absmax_offset};
    nf4_max_abs_kernel<<<unsigned(grid), kThreads, 0, cuda::stream(dev)>>>(
        nf4, numel, reinterpret_cast<unsigned*>(out.ptr<float>()), nf4_device_tables());
    cuda::check_launch("nf4_max_abs");
  }
  return out.to_float_vector()[0];
}

}  // namespace loft
