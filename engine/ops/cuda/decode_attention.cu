// Decode attention (one new query per sequence attending to its KV cache) at HBM bandwidth.
//
// The cache read is the whole cost of a decode step's attention (batch 64 × 1,100 cached positions
// of llama-7b: 36 GB a step). The first version (one warp per block walking cp.async tiles staged
// in 40 KB of shared memory) ran at about a third of HBM bandwidth: five warps per SM could not hide
// the latency of its per-tile math. This one keeps the cache out of shared memory and many warps
// per SM, as vLLM's paged attention and flash-decoding do:
// - a block of 4 warps serves one (token, KV head, split of at most kMaxPart keys) and every query
//   head of that KV head (grouped-query attention reads the KV head once);
// - scores: D/8 lanes hold a key's row (16 bytes each, coalesced loads straight into registers,
//   kUnroll keys in flight per lane) and sum their partial dot products with shuffles; the scores
//   of the split go to shared memory (log2 domain), then one max and one exp2 pass;
// - values: each warp takes every 4th key, each lane D/32 dims of the row (coalesced), and the
//   warps add their partial outputs in shared memory;
// - with several splits, a second kernel merges their (output, max, sum) rows as flash-decoding.
#include "engine/ops/cuda/attention_flash.cuh"
#include "engine/ops/cuda/kv_cache_cuda.h"

namespace loft::ops::cuda {

namespace {

using cuda_kernels::bf16;
using cuda_kernels::warp_max;
using cuda_kernels::warp_sum;
using cuda_attention::flash::exp2_fast;
using cuda_attention::flash::kLog2e;

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kMaxPart = 512;  // keys per split (shared scores: kMaxPart × group floats)
constexpr int kMaxGroup = 8;   // query heads per KV head
constexpr int kUnroll = 8;     // key loads in flight per lane

struct DecodeArgs {
  const bf16 *q, *kc, *vc;
  const int32_t *slots, *pos;
  bf16* out;    // splits == 1
  float* part;  // splits > 1: [T, Hq, splits, D + 2] = unnormalised output, max (log2), sum
  int64_t n_slots;
  int max_len, hq, hkv, group, splits, part_len;
  float scale_log2;
};


// 8 bf16 (one 16-byte load) as floats.
__device__ __forceinline__ void unpack8(const uint4& u, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 x = __bfloat1622float2(h[e]);
    f[2 * e] = x.x, f[2 * e + 1] = x.y;
  }
}

// G = the largest group the instance serves (1, 2, 4 or 8); a.group ≤ G.
template <int D, int G>
__global__ void __launch_bounds__(kThreads) decode_kernel(DecodeArgs a) {
  constexpr int kLanesPerKey = D / 8;              // 16-byte pieces of a row
  constexpr int kKeysPerPass = 32 / kLanesPerKey;  // keys a warp scores per load
  constexpr int kPer = D / 32;                     // output dims per lane
  __shared__ float s_score[G][kMaxPart];
  __shared__ float s_out[kWarps][G][D];
  __shared__ float s_red[G][kWarps];

  const int64_t t = blockIdx.x / a.hkv;
  const int kh = int(blockIdx.x % a.hkv), tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int32_t slot = a.slots[t], p = a.pos[t];
  const int n = (slot >= 0 && slot < a.n_slots && p >= 0 && p < a.max_len) ? p + 1 : 0;
  const int k0 = blockIdx.y * a.part_len, k1 = min(n, k0 + a.part_len), len = k1 - k0;
  const int64_t h0 = int64_t(kh) * a.group;
  if (len <= 0) {  // no keys here: an empty partial, or a zero row when nothing is cached
    for (int i = tid; i < a.group * D; i += kThreads) {
      const int64_t h = h0 + i / D;
      if (a.splits == 1) a.out[(t * a.hq + h) * D + i % D] = __float2bfloat16(0.0f);
      else if (i % D == 0) a.part[((t * a.hq + h) * a.splits + blockIdx.y) * (D + 2) + D + 1] = 0.0f;
    }
    return;
  }
  const int64_t row_stride = int64_t(a.hkv) * D;  // elements between consecutive positions
  const bf16* kbase = a.kc + int64_t(slot) * a.max_len * row_stride + int64_t(kh) * D;
  const bf16* vbase = a.vc + int64_t(slot) * a.max_len * row_stride + int64_t(kh) * D;

  // Scores. Lane l holds dims (l % kLanesPerKey)·8.. of key (l / kLanesPerKey) of each pass.
  const int piece = lane % kLanesPerKey, sub = lane / kLanesPerKey;
  float qf[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    uint4 u = make_uint4(0, 0, 0, 0);
    if (g < a.group) u = *reinterpret_cast<const uint4*>(a.q + ((t * a.hq + h0 + g) * D + piece * 8));
    unpack8(u, qf[g]);
#pragma unroll
    for (int e = 0; e < 8; ++e) qf[g][e] *= a.scale_log2;
  }
  constexpr int kStride = kWarps * kKeysPerPass;  // keys between one lane's consecutive loads
  // The loop bound is the same for the whole warp: every lane reaches the shuffles.
  for (int j0 = warp * kKeysPerPass; j0 < len; j0 += kStride * kUnroll) {
    uint4 kv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = j0 + sub + u * kStride;
      kv[u] = j < len ? __ldcs(reinterpret_cast<const uint4*>(kbase + int64_t(k0 + j) * row_stride + piece * 8))
                      : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[8];
      unpack8(kv[u], kf);
      const int j = j0 + sub + u * kStride;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; e += 2) s0 += qf[g][e] * kf[e], s1 += qf[g][e + 1] * kf[e + 1];
        float s = s0 + s1;
#pragma unroll
        for (int o = kLanesPerKey / 2; o > 0; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
        if (piece == 0 && j < len) s_score[g][j] = s;
      }
    }
  }
  __syncthreads();

  // Softmax numerators over the split, in place; m and l per head.
  float m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float mx = -INFINITY;
    for (int j = tid; j < len; j += kThreads) mx = fmaxf(mx, s_score[g][j]);
    mx = warp_max(mx);
    if (lane == 0) s_red[g][warp] = mx;
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = fmaxf(fmaxf(s_red[g][0], s_red[g][1]), fmaxf(s_red[g][2], s_red[g][3]));
    float sum = 0.0f;
    for (int j = tid; j < len; j += kThreads) {
      const float e = exp2_fast(s_score[g][j] - m[g]);
      s_score[g][j] = e;
      sum += e;
    }
    l[g] = warp_sum(sum);
  }
  __syncthreads();  // every s_red max read before the sums overwrite it
#pragma unroll
  for (int g = 0; g < G; ++g)
    if (lane == 0) s_red[g][warp] = l[g];
  __syncthreads();  // numerators and partial sums visible
#pragma unroll
  for (int g = 0; g < G; ++g) l[g] = s_red[g][0] + s_red[g][1] + s_red[g][2] + s_red[g][3];

  // Values: warp w takes keys w, w + 4, ...; lane l owns dims l·kPer...
  float acc[G][kPer];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int e = 0; e < kPer; ++e) acc[g][e] = 0.0f;
  using Vec = std::conditional_t<kPer == 4, uint2, uint32_t>;
  for (int j0 = warp; j0 < len; j0 += kWarps * kUnroll) {
    Vec vv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = j0 + u * kWarps;
      vv[u] = j < len ? __ldcs(reinterpret_cast<const Vec*>(vbase + int64_t(k0 + j) * row_stride + lane * kPer))
                      : Vec{};
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = j0 + u * kWarps;
      if (j >= len) break;
      float vf[kPer];
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&vv[u]);
#pragma unroll
      for (int e = 0; e < kPer / 2; ++e) {
        const float2 x = __bfloat1622float2(h[e]);
        vf[2 * e] = x.x, vf[2 * e + 1] = x.y;
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float pj = s_score[g][j];
#pragma unroll
        for (int e = 0; e < kPer; ++e) acc[g][e] += pj * vf[e];
      }
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int e = 0; e < kPer; ++e) s_out[warp][g][lane * kPer + e] = acc[g][e];
  __syncthreads();

  for (int i = tid; i < a.group * D; i += kThreads) {
    const int g = i / D, e = i % D;
    const float o = s_out[0][g][e] + s_out[1][g][e] + s_out[2][g][e] + s_out[3][g][e];
    const int64_t h = h0 + g;
    float lg = 0.0f, mg = 0.0f;
#pragma unroll
    for (int gg = 0; gg < G; ++gg)
      if (gg == g) lg = l[gg], mg = m[gg];
    if (a.splits == 1) {
      a.out[(t * a.hq + h) * D + e] = __float2bfloat16(o / lg);
    } else {
      float* row = a.part + ((t * a.hq + h) * a.splits + blockIdx.y) * (D + 2);
      row[e] = o;
      if (e == 0) row[D] = mg, row[D + 1] = lg;
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

template <int D>
void launch(const dim3& grid, cudaStream_t stream, const DecodeArgs& args) {
  if (args.group == 1) decode_kernel<D, 1><<<grid, kThreads, 0, stream>>>(args);
  else if (args.group == 2) decode_kernel<D, 2><<<grid, kThreads, 0, stream>>>(args);
  else if (args.group <= 4) decode_kernel<D, 4><<<grid, kThreads, 0, stream>>>(args);
  else decode_kernel<D, 8><<<grid, kThreads, 0, stream>>>(args);
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
  LOFT_CHECK(cuda_kernels::aligned16(v_cache.data()), "decode_attention: the V cache is not 16-byte aligned");
  const int64_t tokens = q.size(0), hkv = k_cache.size(2), d = q.size(2), max_len = k_cache.size(1);
  // Splits of at most kMaxPart keys (shared scores), more when (token, KV head) pairs are too few
  // to give every SM several blocks (a single stream), never under 64 keys each.
  const int64_t pairs = tokens * hkv, want = int64_t(cuda_kernels::sm_count(dev)) * 8;
  int64_t splits = (max_len + kMaxPart - 1) / kMaxPart;
  if (pairs * splits < want) splits = std::min((want + pairs - 1) / pairs, (max_len + 63) / 64);
  const int64_t part_len = ((max_len + splits - 1) / splits + 63) / 64 * 64;
  splits = (max_len + part_len - 1) / part_len;
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
                        int(max_len),
                        int(q.size(1)),
                        int(hkv),
                        int(q.size(1) / hkv),
                        int(splits),
                        int(part_len),
                        scale * kLog2e};
  const cudaStream_t stream = loft::cuda::stream(dev);
  const dim3 grid{unsigned(pairs), unsigned(splits)};
  if (d == 64) launch<64>(grid, stream, args);
  else launch<128>(grid, stream, args);
  loft::cuda::check_launch("decode_attention");
  if (splits == 1) return;
  const unsigned rows = unsigned(tokens * q.size(1));
  if (d == 64) merge_kernel<64><<<rows, 64, 0, stream>>>(part.ptr<float>(), out.ptr<bf16>(), int(splits));
  else merge_kernel<128><<<rows, 128, 0, stream>>>(part.ptr<float>(), out.ptr<bf16>(), int(splits));
  loft::cuda::check_launch("decode_attention merge");
}

}  // namespace loft::ops::cuda
