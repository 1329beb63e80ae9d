// Flash attention forward (FlashAttention-2 schedule) and the flash path's support test.
//
// One block of 4 warps per (query tile of 64 rows, query head, batch row); warp w owns query rows
// 16w..16w+15 of the tile and keeps their Q fragments in registers. Key tiles of 64 run from the
// diagonal one down to the tile's earliest document start: tiles wholly above the causal diagonal
// or before every row's document are never touched. Scores stay in registers (fp32), the softmax is
// online in the log2 domain, and nothing of size S×S is allocated.
//
// K and V have one shared buffer each, filled by cp.async so that loads overlap the math: V of
// tile t loads while S = Q·Kᵀ and the softmax of tile t run, K of the next tile while P·V of tile
// t runs (FlashAttention-2's order). Fragments come from shared memory by ldmatrix; only tiles that
// cross the diagonal or a document start are masked element by element.
//
// The same kernel attends new queries to a KV cache (kCached, flash_cached_forward): a block then
// serves one tile of up to 64 consecutive tokens of one sequence (tiles[z] = first token, rows,
// cache slot, position of the first row) and reads its keys from the cache slot, positions 0 up
// to the last row's; row i sees the keys at positions <= pos0 + i.
#include <climits>

#include "engine/ops/cuda/attention_flash.cuh"
#include "engine/ops/cuda/attention_paths.h"

namespace loft::ops::cuda_attention {

namespace {

using namespace flash;

constexpr int kQueries = 64;  // query rows per block (16 per warp)
constexpr int kKeys = 64;     // keys per tile
constexpr int kThreads = 4 * kWarp;
constexpr int64_t kMaxTiles = 65535;  // grid z (query tiles here, key tiles in the backward)

struct ForwardArgs {
  const bf16 *q, *k, *v;    // cached: k, v are the caches [slots, seq, hkv, D]
  const int32_t* doc_start;  // packed
  const int32_t* tiles;      // cached: [gridDim.z, 4] = first token, rows, slot, pos0
  bf16* out;
  float* lse;  // packed
  int seq, hq, hkv, group;   // cached: seq = the cache's max_len
  float scale_log2;  // scale · log2(e): scores go straight to the exp2 domain
};

template <int D, bool kCached>
__global__ void __launch_bounds__(kThreads, D == 64 ? 4 : 3) flash_forward_kernel(ForwardArgs a) {
  constexpr int ld = row_stride<D>();
  __shared__ alignas(16) bf16 sk[kKeys * ld];
  __shared__ alignas(16) bf16 sv[kKeys * ld];  // also stages the Q tile
  __shared__ int s_fk[kQueries];               // per-row first key, read only on masked tiles
  __shared__ int s_fk_min, s_fk_max;

  const int h = blockIdx.x, kvh = h / a.group;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, g = lane / 4, c = lane % 4;
  // Packed: grid z runs over query tiles, last tiles (most key tiles) first, so the grid's tail is
  // short; the tile's queries are rows q0.. of batch row `row0`, keys the same rows. Cached: the
  // tile's queries are tokens q_row0.. (`rows` of them), its keys rows kv_row0 + 0..n_keys-1 of the
  // caches; row i sees keys up to diag + i either way.
  int q0, rows, diag, n_keys, k_top;
  int64_t row0, q_row0, kv_row0;
  if constexpr (kCached) {
    const int32_t* t = a.tiles + 4 * int64_t(blockIdx.z);
    q0 = 0, rows = t[1], diag = t[3], n_keys = diag + rows;
    row0 = q_row0 = t[0];
    kv_row0 = int64_t(t[2]) * a.seq;
    k_top = (n_keys - 1) / kKeys * kKeys;
  } else {
    q0 = int(gridDim.z - 1 - blockIdx.z) * kQueries;
    rows = a.seq, diag = q0, n_keys = a.seq, k_top = q0;
    row0 = q_row0 = kv_row0 = int64_t(blockIdx.y) * a.seq;
  }

  // Q into sv and the diagonal key tile (the first one processed; it is the query tile's own
  // span) into sk, and meanwhile the tile's range of document starts.
  if (threadIdx.x == 0) s_fk_min = kCached ? 0 : INT_MAX, s_fk_max = 0;
  copy_tile_async<D, kThreads>(sv, a.q, q_row0, q0, kQueries, rows, a.hq, h);
  copy_tile_async<D, kThreads>(sk, a.k, kv_row0, k_top, kKeys, n_keys, a.hkv, kvh);
  cp_async_commit();
  __syncthreads();
  if (threadIdx.x < kQueries) {
    const bool valid = !kCached && q0 + int(threadIdx.x) < a.seq;
    const int fk = valid ? first_key(a.doc_start, row0, q0 + threadIdx.x) : 0;
    s_fk[threadIdx.x] = fk;
    if (valid) atomicMin(&s_fk_min, fk), atomicMax(&s_fk_max, fk);
  }
  cp_async_wait<0>();
  __syncthreads();
  const int fk_max = s_fk_max;
  const int k_first = s_fk_min / kKeys * kKeys;  // the earliest key tile any row sees

  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kd = 0; kd < D / 16; ++kd) load_a(qf[kd], sv, ld, warp * 16, kd * 16, lane);

  // This thread's two query rows are C-fragment rows g and g + 8 of the warp's 16.
  const int row_local = warp * 16 + g;
  const bool active = q0 + warp * 16 < rows;  // decode: one row per tile, warps 1..3 idle

  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // running max (log2) and sum
  float o[D / 8][4] = {};
  // Key tiles from the diagonal down (as FlashAttention-2): the first tile's K loads with Q.
  for (int k0 = k_top; k0 >= k_first; k0 -= kKeys) {
    cp_async_wait<0>();
    __syncthreads();  // K of this tile is in; every warp is done with sv (Q or the last V)
    copy_tile_async<D, kThreads>(sv, a.v, kv_row0, k0, kKeys, n_keys, a.hkv, kvh);
    cp_async_commit();

    float s[kKeys / 8][4] = {};  // scores of the warp's 16 rows × 64 keys
    if (active) {  // a warp whose 16 rows are all past a cached tile's rows only loads
#pragma unroll
      for (int kd = 0; kd < D / 16; ++kd)
#pragma unroll
        for (int nk = 0; nk < kKeys / 8; nk += 2) {
          uint32_t b[4];
          load_b_rows(b, sk, ld, nk * 8, kd * 16, lane);
          mma2(s[nk], s[nk + 1], qf[kd], b);
        }

      // Every key of the tile visible to every row of the block: no per-element mask.
      const bool whole = k0 >= fk_max && k0 + kKeys - 1 <= diag;
#pragma unroll
      for (int nk = 0; nk < kKeys / 8; ++nk)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nk][e] *= a.scale_log2;
      if (!whole) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int i = row_local + 8 * r, fk = s_fk[i];
#pragma unroll
          for (int nk = 0; nk < kKeys / 8; ++nk)
#pragma unroll
            for (int e = 2 * r; e < 2 * r + 2; ++e) {
              const int j = k0 + nk * 8 + 2 * c + e % 2;
              if (j < fk || j > diag + i) s[nk][e] = -INFINITY;
            }
        }
      }
      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nk = 0; nk < kKeys / 8; ++nk)
#pragma unroll
        for (int e = 0; e < 4; ++e) tile_max[e / 2] = fmaxf(tile_max[e / 2], s[nk][e]);
      float alpha[2], base[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        // The 4 lanes of a row (same g) hold its 64 columns.
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(~0u, tile_max[r], 1));
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(~0u, tile_max[r], 2));
        const float m_new = fmaxf(m[r], tile_max[r]);
        // A row with nothing visible yet keeps max −inf; exponentiate against 0 to avoid inf − inf.
        base[r] = m_new == -INFINITY ? 0.0f : m_new;
        alpha[r] = exp2_fast(m[r] - base[r]);
        m[r] = m_new;
      }
      float row_sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int nk = 0; nk < kKeys / 8; ++nk)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float p = exp2_fast(s[nk][e] - base[e / 2]);
          s[nk][e] = p;
          row_sum[e / 2] += p;
        }
#pragma unroll
      for (int r = 0; r < 2; ++r) l[r] = l[r] * alpha[r] + row_sum[r];  // quad-partial sums
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[nd][e] *= alpha[e / 2];
    }

    cp_async_wait<0>();
    __syncthreads();  // V of this tile is in; every warp is done with sk
    if (k0 - kKeys >= k_first) {
      copy_tile_async<D, kThreads>(sk, a.k, kv_row0, k0 - kKeys, kKeys, n_keys, a.hkv, kvh);
      cp_async_commit();
    }

    if (active) {
      // O += P·V with P rounded to bf16 (k-steps of 16 keys).
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        uint32_t pa[4];
        c_to_a(pa, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
        for (int nd = 0; nd < D / 8; nd += 2) {
          uint32_t b[4];
          load_b_cols(b, sv, ld, kk * 16, nd * 8, lane);
          mma2(o[nd], o[nd + 1], pa, b);
        }
      }
    }
  }

  // O / l as bf16 into the warp's own 16 rows of sk (no warp reads sk after the last tile's
  // second barrier), then out in 16-byte row chunks.
  bf16* so = sk + warp * 16 * ld;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(~0u, l[r], 1);
    l[r] += __shfl_xor_sync(~0u, l[r], 2);
    const float inv = 1.0f / l[r];
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd)
      *reinterpret_cast<uint32_t*>(so + (g + 8 * r) * ld + nd * 8 + 2 * c) =
          pack(o[nd][2 * r] * inv, o[nd][2 * r + 1] * inv);
    const int i = q0 + row_local + 8 * r;
    if (!kCached && c == 0 && i < rows) a.lse[(row0 + i) * a.hq + h] = (m[r] + log2f(l[r])) * kLn2;
  }
  __syncwarp();
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int idx = lane; idx < 16 * kChunks; idx += kWarp) {
    const int r = idx / kChunks, col = idx % kChunks * 8, i = q0 + warp * 16 + r;
    if (i < rows)
      *reinterpret_cast<uint4*>(a.out + ((q_row0 + i) * a.hq + h) * D + col) =
          *reinterpret_cast<const uint4*>(so + r * ld + col);
  }
}


}  // namespace

bool flash_supports(const Tensor& q, const Tensor& k, int64_t seq) {
  const int64_t d = q.size(2), rows = q.size(0) / seq;
  return q.dtype() == DType::BF16 && k.dtype() == DType::BF16 && (d == 64 || d == 128) &&
         seq <= kMaxTiles * kQueries && rows <= 65535 && q.size(1) <= 65535 && cuda_kernels::aligned16(q.data()) &&
         cuda_kernels::aligned16(k.data());
}

void flash_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
                   int64_t seq, float scale, Tensor& out, Tensor& lse) {
  if (hopper_forward_supports(q, seq)) return flash_forward_hopper(q, k, v, doc_start, seq, scale, out, lse);
  const int device = cuda_kernels::use_device(q);
  const ForwardArgs args{q.ptr<bf16>(),
                         k.ptr<bf16>(),
                         v.ptr<bf16>(),
                         doc_start.ptr<int32_t>(),
                         nullptr,
                         out.ptr<bf16>(),
                         lse.ptr<float>(),
                         int(seq),
                         int(q.size(1)),
                         int(k.size(1)),
                         int(q.size(1) / k.size(1)),
                         scale * kLog2e};
  const dim3 grid(unsigned(q.size(1)), unsigned(q.size(0) / seq),
                  unsigned((seq + kQueries - 1) / kQueries));
  const cudaStream_t stream = loft::cuda::stream(device);
  if (q.size(2) == 64)
    flash_forward_kernel<64, false><<<grid, kThreads, 0, stream>>>(args);
  else
    flash_forward_kernel<128, false><<<grid, kThreads, 0, stream>>>(args);
  loft::cuda::check_launch("attention flash_forward");
}

bool flash_cached_supports(const Tensor& q, const Tensor& k_cache, int64_t tiles) {
  const int64_t d = q.size(2);
  return q.dtype() == DType::BF16 && k_cache.dtype() == DType::BF16 && (d == 64 || d == 128) &&
         tiles <= kMaxTiles && q.size(1) <= 65535 && k_cache.size(0) * k_cache.size(1) <= INT32_MAX &&
         cuda_kernels::aligned16(q.data()) && cuda_kernels::aligned16(k_cache.data());
}

void flash_cached_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                          const Tensor& tiles, float scale, Tensor& out) {
  const int device = cuda_kernels::use_device(q);
  const ForwardArgs args{q.ptr<bf16>(),       k_cache.ptr<bf16>(),
                         v_cache.ptr<bf16>(), nullptr,
                         tiles.ptr<int32_t>(), out.ptr<bf16>(),
                         nullptr,             int(k_cache.size(1)),
                         int(q.size(1)),      int(k_cache.size(2)),
                         int(q.size(1) / k_cache.size(2)), scale * kLog2e};
  const dim3 grid(unsigned(q.size(1)), 1, unsigned(tiles.size(0)));
  const cudaStream_t stream = loft::cuda::stream(device);
  if (q.size(2) == 64)
    flash_forward_kernel<64, true><<<grid, kThreads, 0, stream>>>(args);
  else
    flash_forward_kernel<128, true><<<grid, kThreads, 0, stream>>>(args);
  loft::cuda::check_launch("attention flash_cached_forward");
}

}  // namespace loft::ops::cuda_attention
