// The byte transpose of quantized codes (engine/quant/code_transpose.h). It runs before every
// frozen dX GEMM of FALQON and HALO, so it must run at memory bandwidth: reads and writes are
// 16 bytes a thread and whole 32-byte sectors a warp, and the turn happens in registers (byte
// permutes of 4×4 blocks) between conflict-free 4-byte shared-memory accesses.
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/quant/cuda/code_transpose_cuda.h"

namespace loft::quant::cuda {

namespace {

using namespace loft::ops::cuda_kernels;

// Vector path: a block of 128 threads per tile of kRows input rows × kCols input columns.
constexpr int kRows = 64, kCols = 128, kVecThreads = 128;
constexpr int kWords = kCols / 4;     // 4-byte words a tile row holds
constexpr int kLd = kWords + 1;       // +1 word: the column reads below hit 32 distinct banks
constexpr int kLoads = kRows * kCols / 16 / kVecThreads;  // 16-byte loads a thread
static_assert(kLoads * kVecThreads * 16 == kRows * kCols, "the threads cover the tile");
static_assert(kWords * (kRows / 16) == kVecThreads, "one thread per (word column, 16 rows)");

// The 4×4 byte transpose: out[b] byte m = in[m] byte b.
__device__ __forceinline__ void transpose4x4(const uint32_t in[4], uint32_t out[4]) {
  const uint32_t t0 = __byte_perm(in[0], in[1], 0x5140), t1 = __byte_perm(in[0], in[1], 0x7362);
  const uint32_t t2 = __byte_perm(in[2], in[3], 0x5140), t3 = __byte_perm(in[2], in[3], 0x7362);
  out[0] = __byte_perm(t0, t2, 0x5410);
  out[1] = __byte_perm(t0, t2, 0x7632);
  out[2] = __byte_perm(t1, t3, 0x5410);
  out[3] = __byte_perm(t1, t3, 0x7632);
}

// rows % 16 == 0, cols % 16 == 0, both pointers 16-byte aligned. Tile (tr, tc) from the 1-D grid.
// Load: thread t takes 16-byte chunks e = p·128 + t (row e / 8, chunk e % 8): a warp reads four
// whole 128-byte row segments and writes their words to banks r + 4c + k, all distinct.
// Store: thread (w, q) gathers word column w (input columns 4w..4w+3) of input rows 16q..16q+15:
// 16 words, turned into 16 bytes of each of output rows 4w..4w+3. A warp holds 16 consecutive w
// and two q: its shared reads hit banks 16q + w + k (distinct), its stores fill 32-byte sectors.
__global__ void __launch_bounds__(kVecThreads)
    transpose_vec_kernel(const uint8_t* __restrict__ in, int64_t rows, int64_t cols,
                         int64_t tiles_c, uint8_t* __restrict__ out) {
  __shared__ uint32_t tile[kRows][kLd];
  const int64_t tr = int64_t(blockIdx.x) / tiles_c, tc = int64_t(blockIdx.x) % tiles_c;
  const int64_t row0 = tr * kRows, col0 = tc * kCols;
  const int t = int(threadIdx.x);
  uint4 v[kLoads];
#pragma unroll
  for (int p = 0; p < kLoads; ++p) {  // all loads in flight before any shared store
    const int e = p * kVecThreads + t, r = e / (kCols / 16), c = e % (kCols / 16);
    const int64_t gr = row0 + r, gc = col0 + 16 * c;
    v[p] = gr < rows && gc < cols ? *reinterpret_cast<const uint4*>(in + gr * cols + gc)
                                  : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int p = 0; p < kLoads; ++p) {
    const int e = p * kVecThreads + t, r = e / (kCols / 16), c = e % (kCols / 16);
    tile[r][4 * c + 0] = v[p].x;
    tile[r][4 * c + 1] = v[p].y;
    tile[r][4 * c + 2] = v[p].z;
    tile[r][4 * c + 3] = v[p].w;
  }
  __syncthreads();
  const int lane = t & 31, warp = t >> 5;
  const int w = (lane & 15) + 16 * (warp & 1), q = (lane >> 4) + 2 * (warp >> 1);
  const int64_t gr = row0 + 16 * q, gc = col0 + 4 * w;
  if (gr >= rows || gc >= cols) return;  // rows, cols % 16 == 0: a group is wholly in or out
  uint32_t o[4][4];  // o[b][m]: output row gc + b, bytes 4m..4m+3 of its 16
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const uint32_t words[4] = {tile[16 * q + 4 * m][w], tile[16 * q + 4 * m + 1][w],
                               tile[16 * q + 4 * m + 2][w], tile[16 * q + 4 * m + 3][w]};
    uint32_t turned[4];
    transpose4x4(words, turned);
#pragma unroll
    for (int b = 0; b < 4; ++b) o[b][m] = turned[b];
  }
#pragma unroll
  for (int b = 0; b < 4; ++b)
    *reinterpret_cast<uint4*>(out + (gc + b) * rows + gr) = make_uint4(o[b][0], o[b][1], o[b][2], o[b][3]);
}

// Any shape or alignment: block (32, 8) per 32×32 tile, both global passes along rows.
constexpr int kTile = 32, kTileRows = 8;

__global__ void transpose_kernel(const uint8_t* __restrict__ in, int64_t rows, int64_t cols,
                                 int64_t tiles_c, uint8_t* __restrict__ out) {
  __shared__ uint8_t tile[kTile][kTile + 1];
  const int64_t r0 = int64_t(blockIdx.x) / tiles_c * kTile, c0 = int64_t(blockIdx.x) % tiles_c * kTile;
#pragma unroll
  for (int j = 0; j < kTile; j += kTileRows) {
    const int64_t r = r0 + threadIdx.y + j, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[threadIdx.y + j][threadIdx.x] = in[r * cols + c];
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kTile; j += kTileRows) {
    const int64_t c = c0 + threadIdx.y + j, r = r0 + threadIdx.x;
    if (r < rows && c < cols) out[c * rows + r] = tile[threadIdx.x][threadIdx.y + j];
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

void transpose_codes(const Tensor& src, Tensor& dst) {
  const int dev = use_device(src);
  const int64_t rows = src.size(0), cols = src.size(1);
  if (rows == 0 || cols == 0) return;
  cudaStream_t st = loft::cuda::stream(dev);
  const auto* in = src.ptr<uint8_t>();
  auto* out = dst.ptr<uint8_t>();
  const bool vec = rows % 16 == 0 && cols % 16 == 0 && aligned16(in) && aligned16(out);
  const int64_t tiles_c = ceil_div(cols, vec ? kCols : kTile);
  const int64_t tiles = ceil_div(rows, vec ? kRows : kTile) * tiles_c;
  LOFT_CHECK(tiles < (int64_t(1) << 31), "transpose_codes: ", src.str(), " is too large");
  if (vec) {
    transpose_vec_kernel<<<unsigned(tiles), kVecThreads, 0, st>>>(in, rows, cols, tiles_c, out);
    loft::cuda::check_launch("transpose_vec_kernel");
  } else {
    transpose_kernel<<<unsigned(tiles), dim3(kTile, kTileRows), 0, st>>>(in, rows, cols, tiles_c, out);
    loft::cuda::check_launch("transpose_kernel");
  }
}

}  // namespace loft::quant::cuda
