// Decode attention (one new query per sequence attending to its KV cache) at HBM bandwidth.
//
// The cache read is the whole cost of a decode step's attention (batch 64 × 1,200 cached positions
// of llama-7b: 40 GB a step), so the kernel is built around keeping many loads in flight: one warp
// per block, serving one (token, KV head) and all of that KV head's query heads (grouped-query
// attention reads each KV head once), walking 32-key tiles of K and V double-buffered by cp.async
// in shared memory (the next tile lands while this one is used). Small blocks let six of them share
// an SM. Lane j scores key j of a tile against every query head of the group (16-byte shared
// reads, rows padded so the lanes of a phase hit distinct banks); the online softmax stays in the
// log2 domain; lane l owns head dims l·D/32.. of the output. When there are few (token, KV head)
// pairs (a single stream), the keys are split over several blocks and a second kernel merges their
// partial (max, sum, output) rows, as flash-decoding does.
#include "engine/ops/cuda/attention_flash.cuh"
#include "engine/ops/cuda/kv_cache_cuda.h"

namespace loft::ops::cuda_kv {

namespace {

using cuda_kernels::bf16;
using namespace cuda_attention::flash;  // cp.async helpers, exp2_fast, kWarp

constexpr int kTile = 32;      // keys per tile: one per lane
constexpr int kMaxGroup = 8;   // query heads per KV head served by one block
constexpr int kStages = 2;

struct DecodeArgs {
  const bf16 *q, *kc, *vc;
  const int32_t *slots, *pos;
  bf16* out;         // splits == 1
  float* part;       // splits > 1: [T, Hq, splits, D + 2] = unnormalised output, max (log2), sum
  int64_t n_slots;
  int max_len, hq, hkv, group, splits;
  float scale_log2;
};

template <int D>
__global__ void __launch_bounds__(kWarp) decode_kernel(DecodeArgs a) {
  constexpr int ld = D + 8;           // padded row (bf16): 16-byte aligned, bank-spread
  constexpr int kPer = D / kWarp;     // output dims per lane
  constexpr int kChunks = D / 8;      // 16-byte chunks per row
  __shared__ alignas(16) bf16 sk[kStages][kTile * ld];
  __shared__ alignas(16) bf16 sv[kStages][kTile * ld];
  __shared__ float sq[kMaxGroup][D];
  __shared__ float sp[kMaxGroup][kTile];

  const int64_t t = blockIdx.x / a.hkv;
  const int kh = int(blockIdx.x % a.hkv), lane = threadIdx.x, G = a.group;
  const int32_t slot = a.slots[t], p = a.pos[t];
  const int n = (slot >= 0 && slot < a.n_slots && p >= 0 && p < a.max_len) ? p + 1 : 0;
  const int tiles = (n + kTile - 1) / kTile, per_split = (tiles + a.splits - 1) / a.splits;
  const int tile0 = blockIdx.y * per_split, tile1 = min(tiles, tile0 + per_split);

  for (int i = lane; i < G * D; i += kWarp)
    sq[i / D][i % D] = __bfloat162float(a.q[(t * a.hq + int64_t(kh) * G + i / D) * D + i % D]) * a.scale_log2;

  const int64_t row_stride = int64_t(a.hkv) * D;  // elements between consecutive positions
  const int64_t base = (int64_t(max(slot, 0)) * a.max_len) * row_stride + int64_t(kh) * D;
  auto load = [&](int tile, int stage) {
    for (int idx = lane; idx < kTile * kChunks; idx += kWarp) {
      const int r = idx / kChunks, col = idx % kChunks * 8, j = tile * kTile + r;
      const bool in = j < n;
      const int64_t at = base + int64_t(in ? j : 0) * row_stride + col;
      cp_async_16(&sk[stage][r * ld + col], a.kc + at, in ? 16 : 0);
      cp_async_16(&sv[stage][r * ld + col], a.vc + at, in ? 16 : 0);
    }
    cp_async_commit();
  };

  float m[kMaxGroup], l[kMaxGroup], acc[kMaxGroup][kPer];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -INFINITY, l[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < kPer; ++e) acc[g][e] = 0.0f;
  }
  if (tile0 < tile1) load(tile0, 0);
  __syncwarp();  // sq written
  for (int tile = tile0; tile < tile1; ++tile) {
    const int stage = (tile - tile0) % kStages;
    if (tile + 1 < tile1) {
      load(tile + 1, (stage + 1) % kStages);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncwarp();
    // Lane j: key tile·32 + j against every query head of the group.
    float s[kMaxGroup];
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) s[g] = 0.0f;
    const bf16* krow = &sk[stage][lane * ld];
#pragma unroll 4
    for (int c = 0; c < kChunks; ++c) {
      const uint4 u = *reinterpret_cast<const uint4*>(krow + c * 8);
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
      float kf[8];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 f = __bfloat1622float2(h[e]);
        kf[2 * e] = f.x, kf[2 * e + 1] = f.y;
      }
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g)
        if (g < G)
#pragma unroll
          for (int e = 0; e < 8; ++e) s[g] += sq[g][c * 8 + e] * kf[e];
    }
    const bool valid = tile * kTile + lane < n;
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g >= G) break;
      float sg = valid ? s[g] : -INFINITY, mx = sg;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, o));
      const float m_new = fmaxf(m[g], mx);  // finite: key tile·32 is valid
      const float corr = exp2_fast(m[g] - m_new), pj = exp2_fast(sg - m_new);
      m[g] = m_new;
      l[g] = l[g] * corr + pj;  // lane-partial; summed over lanes at the end
#pragma unroll
      for (int e = 0; e < kPer; ++e) acc[g][e] *= corr;
      sp[g][lane] = pj;
    }
    __syncwarp();
    // Lane l: output dims l·kPer.. += Σ_j p_j · V[j].
#pragma unroll 4
    for (int j = 0; j < kTile; ++j) {
      const bf16* vrow = &sv[stage][j * ld + lane * kPer];
      float vf[kPer];
#pragma unroll
      for (int e = 0; e < kPer; e += 2) {
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(vrow + e));
        vf[e] = f.x, vf[e + 1] = f.y;
      }
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g)
        if (g < G) {
          const float pj = sp[g][j];
#pragma unroll
          for (int e = 0; e < kPer; ++e) acc[g][e] += pj * vf[e];
        }
    }
    __syncwarp();  // this stage's buffers and sp are free for the tile after next
  }

#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g >= G) break;
    float sum = l[g];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(~0u, sum, o);
    const int64_t h = int64_t(kh) * G + g;
    if (a.splits == 1) {
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
      for (int e = 0; e < kPer; e += 2)
        *reinterpret_cast<__nv_bfloat162*>(a.out + (t * a.hq + h) * D + lane * kPer + e) =
            __floats2bfloat162_rn(acc[g][e] * inv, acc[g][e + 1] * inv);
    } else {
      float* row = a.part + ((t * a.hq + h) * a.splits + blockIdx.y) * (D + 2);
#pragma unroll
      for (int e = 0; e < kPer; ++e) row[lane * kPer + e] = acc[g][e];
      if (lane == 0) row[D] = m[g], row[D + 1] = sum;
    }
  }
}

// out[t, h] = Σ_s o_s·2^(m_s − M) / Σ_s l_s·2^(m_s − M) over the splits that saw keys.
template <int D>
__global__ void merge_kernel(const float* part, bf16* out, int splits) {
  const int64_t th = blockIdx.x;
  const float* rows = part + th * splits * (D + 2);
  float mx = -INFINITY;
  for (int s = 0; s < splits; ++s)
    if (rows[s * (D + 2) + D + 1] > 0.0f) mx = fmaxf(mx, rows[s * (D + 2) + D]);
  for (int e = threadIdx.x; e < D; e += blockDim.x) {
    float o = 0.0f, sum = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float* r = rows + s * (D + 2);
      if (r[D + 1] <= 0.0f) continue;
      const float w = exp2f(r[D] - mx);
      o += r[e] * w;
      sum += r[D + 1] * w;
    }
    out[th * D + e] = __float2bfloat16(sum > 0.0f ? o / sum : 0.0f);
  }
}

}  // namespace

bool decode_attention_supports(const Tensor& q, const Tensor& k_cache) {
  const int64_t d = q.size(2), group = q.size(1) / k_cache.size(2);
  return q.dtype() == DType::BF16 && k_cache.dtype() == DType::BF16 && (d == 64 || d == 128) &&
         group <= kMaxGroup && q.size(0) * k_cache.size(2) <= INT32_MAX && k_cache.size(1) <= INT32_MAX &&
         cuda_kernels::aligned16(q.data()) && cuda_kernels::aligned16(k_cache.data());
}

void decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& slots,
                      const Tensor& pos, float scale, Tensor& out) {
  const int dev = cuda_kernels::use_device(q);
  const int64_t tokens = q.size(0), hkv = k_cache.size(2), d = q.size(2);
  // Enough blocks for every SM to hold several: split the keys when (token, KV head) pairs are few.
  const int64_t blocks = tokens * hkv, want = int64_t(cuda_kernels::sm_count(dev)) * 8;
  const int64_t tiles = (k_cache.size(1) + kTile - 1) / kTile;
  const int splits = int(std::clamp<int64_t>((want + blocks - 1) / blocks, 1, std::min<int64_t>(tiles, 32)));
  Tensor part;
  if (splits > 1) part = Tensor::empty({tokens, q.size(1), splits, d + 2}, DType::F32, q.device());
  const DecodeArgs args{q.ptr<bf16>(),
                        k_cache.ptr<bf16>(),
                        v_cache.ptr<bf16>(),
                        slots.ptr<int32_t>(),
                        pos.ptr<int32_t>(),
                        out.ptr<bf16>(),
                        splits > 1 ? part.ptr<float>() : nullptr,
                        k_cache.size(0),
                        int(k_cache.size(1)),
                        int(q.size(1)),
                        int(hkv),
                        int(q.size(1) / hkv),
                        splits,
                        scale * kLog2e};
  const cudaStream_t stream = cuda::stream(dev);
  const dim3 grid{unsigned(blocks), unsigned(splits)};
  if (d == 64) decode_kernel<64><<<grid, kWarp, 0, stream>>>(args);
  else decode_kernel<128><<<grid, kWarp, 0, stream>>>(args);
  cuda::check_launch("decode_attention");
  if (splits == 1) return;
  const unsigned rows = unsigned(tokens * q.size(1));
  if (d == 64) merge_kernel<64><<<rows, 64, 0, stream>>>(part.ptr<float>(), out.ptr<bf16>(), splits);
  else merge_kernel<128><<<rows, 128, 0, stream>>>(part.ptr<float>(), out.ptr<bf16>(), splits);
  cuda::check_launch("decode_attention merge");
}

}  // namespace loft::ops::cuda_kv
