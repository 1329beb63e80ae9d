// The flash attention backward for GPUs whose blocks get less shared memory than
// attention_flash_backward.cu's layout needs (sm_86, sm_89 and sm_120 give a block at most 99 KiB;
// that layout takes 172 KiB at head dim 128): the FlashAttention-2 schedule on blocks of 64 keys.
//
// One block of 4 warps per (key tile of 64, kv head, batch row); warp w owns keys 16w..16w+15 and
// accumulates their dK and dV in registers over every query head of the kv head's group and every
// query step of 32 (head dim 128) or 64 queries that can see the key tile. Each step computes
// Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for the warp's 16 keys, turns them into Pᵀ and dSᵀ in registers (dSᵀ
// also to shared memory), adds Pᵀ·dO and dSᵀ·Q into dV and dK, then dQ += dS·K for the step with
// the same fp32 atomics as the other kernel. Q, dO, lse, D and doc starts are double-buffered and
// copied one step ahead by cp.async; steps crossing the diagonal or a document start are masked
// element by element.
#include <climits>

#include "engine/ops/cuda/attention_flash_backward.cuh"

namespace loft::ops::cuda_attention::flash {

namespace {

constexpr int kKeys = 64;  // keys per block (16 per warp)
constexpr int kThreads = 4 * kWarp;

// Queries per step: as many as the registers allow (dK and dV take 2·D/2 fp32 per thread, the
// step's Sᵀ and dPᵀ kQueries).
template <int D>
struct Tiles {
  static constexpr int kQueries = D == 64 ? 64 : 32;
  static constexpr int kDsStride = kQueries + 8;  // dSᵀ tile [key][query], padded like the others
  static constexpr int kDqRowGroups = kQueries / 16;    // dQ: warps split the step's query rows
  static constexpr int kDqCols = D * kDqRowGroups / 4;  // and then the head dim
  // Dynamic shared memory: K, V (64 rows); Q, dO (2 buffers of kQueries rows); dSᵀ; per query
  // and buffer its lse, D and doc start.
  static constexpr size_t kQTile = size_t(kQueries) * row_stride<D>();
  static constexpr size_t kBytes = (2 * kKeys * row_stride<D>() + 4 * kQTile) * sizeof(bf16) +
                                   kKeys * kDsStride * sizeof(bf16) + 2 * kQueries * 3 * 4;
};

template <int D>
__global__ void __launch_bounds__(kThreads, 2) flash_backward_kernel(BackwardArgs a) {
  using T = Tiles<D>;
  constexpr int ld = row_stride<D>(), kQ = T::kQueries, kDs = T::kDsStride;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sk = reinterpret_cast<bf16*>(smem);
  bf16* sv = sk + kKeys * ld;
  bf16* sq = sv + kKeys * ld;                                  // [2][kQ × ld]
  bf16* sdo = sq + 2 * T::kQTile;                              // [2][kQ × ld]
  bf16* sds = sdo + 2 * T::kQTile;                             // [kKeys × kDs]
  float* s_lse = reinterpret_cast<float*>(sds + kKeys * kDs);  // [2][kQ], natural log
  float* s_drow = s_lse + 2 * kQ;                              // [2][kQ]
  int* s_doc = reinterpret_cast<int*>(s_drow + 2 * kQ);        // [2][kQ], raw doc_start
  __shared__ int s_q_end;

  // Grid z runs over key tiles, first tiles (most query steps) first.
  const int k0 = blockIdx.z * kKeys, kvh = blockIdx.x;
  const int64_t row0 = int64_t(blockIdx.y) * a.seq;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, g = lane / 4, c = lane % 4;

  copy_tile_async<D, kThreads>(sk, a.k, row0, k0, kKeys, a.seq, a.hkv, kvh);
  copy_tile_async<D, kThreads>(sv, a.v, row0, k0, kKeys, a.seq, a.hkv, kvh);
  cp_async_commit();

  const StepBuffers bufs{sq, sdo, s_lse, s_drow, s_doc};
  const auto issue = [&](int buf, int h, int q0) { copy_step_async<D, kThreads, kQ>(a, bufs, row0, buf, h, q0); };
  issue(0, kvh * a.group, k0);  // the first step: first head of the group, queries from k0
  cp_async_commit();

  bool docs_cut;
  const int steps = steps_per_head<kThreads, kKeys, kQ>(a, row0, k0, s_q_end, docs_cut);  // row k0 sees the tile
  const int total = steps * a.group;

  const int key_local = warp * 16 + g;         // this thread's keys: key_local and key_local + 8
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};  // the warp's 16 keys × D
  // Step n: query head kvh·group + n / steps, queries from k0 + (n % steps)·kQ, buffer n % 2.
  for (int n = 0; n < total; ++n) {
    // Step n + 1's buffers were last read by step n − 1, which every warp finished before the
    // last barrier.
    if (n + 1 < total)
      issue((n + 1) & 1, kvh * a.group + (n + 1) / steps, k0 + (n + 1) % steps * kQ);
    cp_async_commit();  // possibly empty: keeps "all but the newest group" = step n
    cp_async_wait<1>();
    __syncthreads();  // step n's tiles (and K, V) are in; every warp is done with sds

    const int buf = n & 1, h = kvh * a.group + n / steps, q0 = k0 + n % steps * kQ;
    const bf16* qt = sq + buf * T::kQTile;
    const bf16* dot = sdo + buf * T::kQTile;

    // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for the warp's 16 keys × kQ queries.
    float st[kQ / 8][4] = {}, dpt[kQ / 8][4] = {};
#pragma unroll
    for (int kd = 0; kd < D / 16; ++kd) {
      uint32_t ka[4], va[4];
      load_a(ka, sk, ld, warp * 16, kd * 16, lane);
      load_a(va, sv, ld, warp * 16, kd * 16, lane);
#pragma unroll
      for (int nq = 0; nq < kQ / 8; nq += 2) {
        uint32_t b[4];
        load_b_rows(b, qt, ld, nq * 8, kd * 16, lane);
        mma2(st[nq], st[nq + 1], ka, b);
        load_b_rows(b, dot, ld, nq * 8, kd * 16, lane);
        mma2(dpt[nq], dpt[nq + 1], va, b);
      }
    }

    // Pᵀ = exp(S − lse) where visible, dSᵀ = Pᵀ ∘ (dPᵀ − D) · scale. Queries past seq need no
    // mask: their Q, dO, lse and D are zeros, so their dS is 0 and their dO rows add nothing.
    const bool masked = docs_cut || q0 < k0 + kKeys - 1;
#pragma unroll
    for (int nq = 0; nq < kQ / 8; ++nq) {
      const int qi = buf * kQ + nq * 8 + 2 * c;  // this thread's queries qi, qi + 1 of the step
      const float2 lse = *reinterpret_cast<const float2*>(s_lse + qi);
      const float2 drow = *reinterpret_cast<const float2*>(s_drow + qi);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = e % 2;
        float p = exp2_fast(st[nq][e] * a.scale_log2 - (col ? lse.y : lse.x) * kLog2e);
        if (masked) {
          const int i = q0 + nq * 8 + 2 * c + col, j = k0 + key_local + 8 * (e / 2);
          const int fk = min(max(s_doc[qi + col], 0), i);
          if (i >= a.seq || j > i || j < fk) p = 0.0f;
        }
        st[nq][e] = p;
        dpt[nq][e] = p * (dpt[nq][e] - (col ? drow.y : drow.x)) * a.scale;
      }
    }

    // dV += Pᵀ·dO and dK += dSᵀ·Q (k-steps of 16 queries); dSᵀ also to sds as [key][query].
#pragma unroll
    for (int kq = 0; kq < kQ / 16; ++kq) {
      uint32_t pa[4], dsa[4];
      c_to_a(pa, st[2 * kq], st[2 * kq + 1]);
      c_to_a(dsa, dpt[2 * kq], dpt[2 * kq + 1]);
      uint32_t* ds_row = reinterpret_cast<uint32_t*>(sds + key_local * kDs + kq * 16 + 2 * c);
      ds_row[0] = dsa[0];
      ds_row[8 * kDs / 2] = dsa[1];
      ds_row[4] = dsa[2];
      ds_row[8 * kDs / 2 + 4] = dsa[3];
#pragma unroll
      for (int nd = 0; nd < D / 8; nd += 2) {
        uint32_t b[4];
        load_b_cols(b, dot, ld, kq * 16, nd * 8, lane);
        mma2(dv[nd], dv[nd + 1], pa, b);
        load_b_cols(b, qt, ld, kq * 16, nd * 8, lane);
        mma2(dk[nd], dk[nd + 1], dsa, b);
      }
    }
    __syncthreads();  // sds complete

    // dQ[kQ × D] += dS[kQ × 64]·K[64 × D]: warp w takes query rows 16·(w % kDqRowGroups).. and
    // the column block w / kDqRowGroups, then adds it into the fp32 accumulator.
    const int mq = warp % T::kDqRowGroups * 16, col0 = warp / T::kDqRowGroups * T::kDqCols;
    float dq[T::kDqCols / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      uint32_t dsa[4];
      load_a_trans(dsa, sds, kDs, kk * 16, mq, lane);
#pragma unroll
      for (int nd = 0; nd < T::kDqCols / 8; nd += 2) {
        uint32_t b[4];
        load_b_cols(b, sk, ld, kk * 16, col0 + nd * 8, lane);
        mma2(dq[nd], dq[nd + 1], dsa, b);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = q0 + mq + g + 8 * r;
      if (i >= a.seq) continue;
      float* dst = a.dq + ((row0 + i) * a.hq + h) * D + col0 + 2 * c;
#pragma unroll
      for (int nd = 0; nd < T::kDqCols / 8; ++nd)
        atomic_add2(dst + nd * 8, dq[nd][2 * r], dq[nd][2 * r + 1]);
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) store_dk_dv(a, row0, kvh, D, k0 + key_local + 8 * r, 2 * c, dk, dv, r);
}

template <int D>
void launch(const BackwardArgs& args, dim3 grid, int device) {
  launch_backward(flash_backward_kernel<D>, Tiles<D>::kBytes, grid, kThreads, args, device,
                  "attention flash_backward (64-key blocks)");
}

}  // namespace

void launch_backward_small(const BackwardArgs& a, int head_dim, int rows, int device) {
  // Key tiles in z (at most 65535: flash_supports), heaviest first.
  const dim3 grid(unsigned(a.hkv), unsigned(rows), unsigned((a.seq + kKeys - 1) / kKeys));
  if (head_dim == 64)
    launch<64>(a, grid, device);
  else
    launch<128>(a, grid, device);
}

}  // namespace loft::ops::cuda_attention::flash
