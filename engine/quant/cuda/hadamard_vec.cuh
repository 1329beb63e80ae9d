// The register-resident Hadamard kernels: the fast paths of hadamard_cuda.cu for the common plans.
// Why: a transform that stages every element through shared memory one 2-byte load at a time
// keeps too few bytes in flight to use the memory bandwidth (~0.5 TB/s measured on an H200);
// here each thread first issues all its 16-byte (rows) or 4-byte x 32 (tokens) loads, then runs
// the low butterfly stages in registers, the middle ones across lanes with shuffles, and only
// the highest through shared memory. The stages still run in the CPU's order (stage h = 1 first)
// with the CPU's a + b / a - b, and the (k = 1) K-mix adds to 0 as the CPU does, so the results
// stay bit for bit those of the CPU reference. hadamard_kmix.cuh loads through load_and_turn.
// Include only from hadamard_cuda.cu (Epi: its epilogues).
#pragma once
#include "engine/ops/cuda/kernel_util.cuh"

namespace loft::quant::vec {

using ops::cuda_kernels::bf16;
using ops::cuda_kernels::kChunk;
using ops::cuda_kernels::load_chunk;
using ops::cuda_kernels::to_f32;

// ---- rows ------------------------------------------------------------------------------------
// A segment is one block of the plan (k·2^m elements: the whole row, or one diagonal block),
// turned by seg / E threads holding E consecutive elements each; a thread block holds `segs`
// segments (threads past them idle but join the shuffles and barriers). Element bits below
// log2(E) + 5 are turned in registers and across lanes; what is left of the segment goes
// through shared memory in one of two ways:
//   Mode::Warp        nothing is left (k = 1, 2^m <= 32·E);
//   Mode::Transposed  k = 1 and R = m - log2(E) - 5 higher bits, R < log2(E): one exchange gives
//                     each thread the 2^R elements that differ in those bits, W = E / 2^R
//                     consecutive positions at a time, turned in registers;
//   Mode::Staged      otherwise (k = 1, 2^m = 32768): stage by stage in shared memory.
// Plans with a K-mix (k > 1) take hadamard_kmix.cuh's kernel, which loads the same way.
enum class Mode : int { Warp, Transposed, Staged };

struct RowParams {
  int seg, seg_threads, segs, log2_p;
  int64_t total_segs;
  float scale;
  const int8_t* h;  // H_1 (its one entry)
};

template <int E>
__device__ __forceinline__ void butterflies_in_thread(float (&v)[E], int log2_p) {
#pragma unroll
  for (int h = 1; h < E; h *= 2) {
    if (h >= (1 << log2_p)) break;
#pragma unroll
    for (int i = 0; i < E; ++i)
      if ((i & h) == 0) {
        const float a = v[i], b = v[i + h];
        v[i] = a + b;
        v[i + h] = a - b;
      }
  }
}

// Every stage along the first index of a[N][W] (h = 1, 2, ..., N/2), each on all W columns.
template <int N, int W>
__device__ __forceinline__ void butterflies_down(float (&a)[N][W]) {
#pragma unroll
  for (int h = 1; h < N; h *= 2)
#pragma unroll
    for (int i = 0; i < N; ++i)
      if ((i & h) == 0)
#pragma unroll
        for (int c = 0; c < W; ++c) {
          const float p = a[i][c], m = a[i + h][c];
          a[i][c] = p + m;
          a[i + h][c] = p - m;
        }
}

// The K-mix of a K = 1 plan, as the CPU computes it: (0 + H_1·v) · scale (−0 becomes +0).
__device__ __forceinline__ float unit_mix(float h0, float v, float scale) {
  float acc = 0.0f;
  acc += h0 * v;
  return acc * scale;
}

// A thread's E consecutive values into its segment's shared-memory copy.
template <int E>
__device__ __forceinline__ void stage_to_shared(float* s, int t, const float (&v)[E]) {
#pragma unroll
  for (int i = 0; i < E; i += 4)
    *reinterpret_cast<float4*>(s + t * E + i) = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
}

// A thread's E consecutive elements of x (from xs; zeros when not live), turned by every stage
// of stride < 32·E: stages below E in registers, then log2_p - log2(E) stages (at most 5) across
// lanes. Every lane of the warp must call it (the shuffles).
template <typename T, int E>
__device__ __forceinline__ void load_and_turn(const T* xs, bool live, float (&v)[E], int log2_p, int lane) {
  if (live) {
#pragma unroll
    for (int c = 0; c < E / kChunk; ++c)
      load_chunk(xs + c * kChunk, *reinterpret_cast<float(*)[kChunk]>(v + c * kChunk));
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) v[i] = 0.0f;
  }
  butterflies_in_thread<E>(v, log2_p);
  // Lane stages: element bit log2(E) + b is lane bit b; sub-rows of p elements span p / E lanes.
  constexpr int log2_e = E == 8 ? 3 : E == 16 ? 4 : 5;
  const int lane_stages = min(max(log2_p - log2_e, 0), 5);
  for (int b = 0; b < lane_stages; ++b) {
    const int h = 1 << b;
#pragma unroll
    for (int i = 0; i < E; ++i) {
      const float other = __shfl_xor_sync(0xffffffffu, v[i], h);
      v[i] = (lane & h) ? other - v[i] : v[i] + other;
    }
  }
}

// R: the bits left for Mode::Transposed (0 otherwise). Its E = 32 blocks (m <= 14) are at most
// 512 threads, which leaves them 128 registers.
template <typename T, int E, Mode M, int R, typename Epi>
__global__ void __launch_bounds__(M == Mode::Transposed && E == 32 ? 512 : 1024) hadamard_rows_vec(const T* x, RowParams prm, Epi epi) {
  extern __shared__ float smem[];
  const int tid = threadIdx.x, lane = tid & 31;
  const int seg_local = tid / prm.seg_threads, t = tid - seg_local * prm.seg_threads;
  const int64_t seg_id = int64_t(blockIdx.x) * prm.segs + seg_local;
  const bool live = seg_local < prm.segs && seg_id < prm.total_segs;
  const int64_t base = seg_id * prm.seg + int64_t(t) * E;

  float v[E];
  load_and_turn<T, E>(x + base, live, v, prm.log2_p, lane);
  constexpr int log2_e = E == 8 ? 3 : E == 16 ? 4 : 5;
  if constexpr (M == Mode::Transposed) {
    // Thread t takes positions hi·2^L + W·t + w (hi < 2^R, w < W), L = log2(E) + 5.
    constexpr int W = E >> R, L = log2_e + 5;
    float* s = smem + (live ? seg_local : 0) * prm.seg;
    if (live) stage_to_shared(s, t, v);
    __syncthreads();
    float u[1 << R][W];
    if (live) {
#pragma unroll
      for (int hi = 0; hi < (1 << R); ++hi) {
        const float* src = s + (hi << L) + W * t;  // lanes read W·32 consecutive floats
        if constexpr (W % 4 == 0) {
#pragma unroll
          for (int w = 0; w < W; w += 4) {
            const float4 f = *reinterpret_cast<const float4*>(src + w);
            u[hi][w] = f.x, u[hi][w + 1] = f.y, u[hi][w + 2] = f.z, u[hi][w + 3] = f.w;
          }
        } else {
          static_assert(W == 2, "Mode::Transposed takes 2, 4 or 8 positions at a time");
          const float2 f = *reinterpret_cast<const float2*>(src);
          u[hi][0] = f.x, u[hi][1] = f.y;
        }
      }
    }
    butterflies_down(u);
    const float h0 = float(__ldg(prm.h));
    epi.begin();
    if (live) {
      const int64_t seg_base = seg_id * prm.seg;
#pragma unroll
      for (int hi = 0; hi < (1 << R); ++hi) {
#pragma unroll
        for (int w = 0; w < W; ++w) u[hi][w] = unit_mix(h0, u[hi][w], prm.scale);
        epi.template put_n<W>(seg_base + (hi << L) + W * t, u[hi]);
      }
    }
    epi.end();
    return;
  }
  if constexpr (M == Mode::Staged) {
    float* s = smem + (live ? seg_local : 0) * prm.seg;
    if (live) stage_to_shared(s, t, v);
    __syncthreads();
    for (int st = log2_e + 5; st < prm.log2_p; ++st) {
      const int h = 1 << st;
      if (live)
        for (int q = t; q < prm.seg / 2; q += prm.seg_threads) {
          const int lo = ((q >> st) << (st + 1)) + (q & (h - 1));
          const float a = s[lo], b = s[lo + h];
          s[lo] = a + b;
          s[lo + h] = a - b;
        }
      __syncthreads();
    }
    // k = 1: the K-mix is 0 + 1·v, then the scale.
    const float h0 = float(__ldg(prm.h));
    if (live) {
#pragma unroll
      for (int i = 0; i < E; ++i) v[i] = unit_mix(h0, s[t * E + i], prm.scale);
    }
  } else {
    // k = 1 and the whole sub-row in one warp: the K-mix is 0 + 1·v, then the scale.
    const float h0 = float(__ldg(prm.h));
#pragma unroll
    for (int i = 0; i < E; ++i) v[i] = unit_mix(h0, v[i], prm.scale);
  }
  epi.begin();
  if (live) {
#pragma unroll
    for (int c = 0; c < E / kChunk; ++c) epi.template put_n<kChunk>(base + c * kChunk, v + c * kChunk);
  }
  epi.end();
}

// ---- tokens ----------------------------------------------------------------------------------
// Token blocks of 256 = 2^8 (K = 1): a thread block turns 256 tokens × 64 columns. Phase 1: warp
// w holds rows 32w..32w+31 and lane l columns 2l, 2l+1, so stages 1..16 (row bits 0-4) run in
// registers. Phase 2, through shared memory: each thread takes 4 row residues r (mod 32) × its
// two columns and the 8 rows r + 32u, for stages 32..128 (row bits 5-7).
struct TokenParams {
  int64_t rows_x, rows_y, cols;
  float scale;
  const int8_t* h;
};
constexpr int kTokBlock = 256, kTokCols = 64, kTokLd = kTokCols;  // lanes write 8-byte pairs
constexpr size_t kTokSmem = size_t(kTokBlock) * kTokLd * sizeof(float);

template <typename T>
__device__ __forceinline__ void load_pair(const T* p, float& a, float& b);
template <>
__device__ __forceinline__ void load_pair<float>(const float* p, float& a, float& b) {
  const float2 f = *reinterpret_cast<const float2*>(p);
  a = f.x, b = f.y;
}
template <>
__device__ __forceinline__ void load_pair<bf16>(const bf16* p, float& a, float& b) {
  const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
  a = f.x, b = f.y;
}

template <typename T, typename Epi>
__global__ void __launch_bounds__(256) hadamard_tokens256(const T* x, TokenParams prm, Epi epi) {
  extern __shared__ float s[];  // [256][kTokLd]
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  const int64_t r0 = int64_t(blockIdx.y) * kTokBlock;
  const int64_t col = int64_t(blockIdx.x) * kTokCols + 2 * l;
  const bool in_cols = col < prm.cols;  // cols is even: a pair is wholly in or out

  float v[32][2];
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int64_t r = r0 + w * 32 + i;
    if (in_cols && r < prm.rows_x)
      load_pair(x + r * prm.cols + col, v[i][0], v[i][1]);
    else
      v[i][0] = v[i][1] = 0.0f;
  }
  butterflies_down(v);  // row bits 0-4
#pragma unroll
  for (int i = 0; i < 32; ++i)
    *reinterpret_cast<float2*>(s + (w * 32 + i) * kTokLd + 2 * l) = make_float2(v[i][0], v[i][1]);
  __syncthreads();

  const float h0 = float(__ldg(prm.h));
  epi.begin();
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int r = w * 4 + q;  // row residue mod 32
    float a[8][2];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const float2 f = *reinterpret_cast<const float2*>(s + (r + 32 * u) * kTokLd + 2 * l);
      a[u][0] = f.x, a[u][1] = f.y;
    }
    butterflies_down(a);  // row bits 5-7
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int64_t row = r0 + r + 32 * u;
      const float out[2] = {unit_mix(h0, a[u][0], prm.scale), unit_mix(h0, a[u][1], prm.scale)};
      if (in_cols && row < prm.rows_y) epi.template put_n<2>(row * prm.cols + col, out);
    }
  }
  epi.end();
}

}  // namespace loft::quant::vec
