// Flash attention backward (FlashAttention-2 schedule).
//
// Where a block may take the 172 KiB of shared memory this needs at head dim 128 (sm_90), else
// attention_flash_backward_small.cu's blocks of 64 keys (flash_backward picks; the consumer cards,
// sm_86/89/120, give a block at most 99 KiB). On an H100/H200 with sm_90a code the same grid runs
// attention_flash_backward_hopper.cu's wgmma kernel at head dim 128 instead.
//
// One block of 8 warps per (key tile of 128, kv head, batch row). It accumulates the tile's dK and
// dV in registers over every query head of the kv head's group and every step of 64 queries that
// can see the tile: from the tile's first key (causal) to the last query whose document starts
// within the tile. So dk/dv need no atomics, and the group sum comes for free. Where that grid
// would leave SMs idle (few kv heads, short batches: splits_for), the group's query heads are
// split over several blocks, each writing fp32 dK/dV partials that one more kernel sums in a fixed
// order. P is recomputed from the saved lse; D = rowsum(dO∘O) comes from a small pre-kernel
// (softmax_row_dot).
//
// A step is three products, each split over the 8 warps as a 2-D grid of warp tiles of 32 rows, so
// that every fragment loaded from shared memory feeds several MMAs (FlashAttention-2's layout):
//   1. S = Q·Kᵀ and dP = dO·Vᵀ [64 queries × 128 keys]: 2 × 4 warps of 32 × 32; P = exp(S − lse)
//      and dS = P ∘ (dP − D) · scale go to shared memory as bf16.
//   2. dV += Pᵀ·dO and dK += dSᵀ·Q [128 keys × D]: 4 × 2 warps of 32 keys × D/2, in registers.
//   3. dQ += dS·K [64 queries × D]: 2 × 4 warps of 32 × D/4, added into an fp32 buffer with
//      atomics (two floats per instruction on sm_90+), which one conversion then writes to dq.
// Warp tiles wholly above the causal diagonal skip their products. The atomics (rather than a
// second pass over query tiles, two more S-sized GEMMs per tile) cost ≈ S/128 fp32 adds per dq
// element, which L2 absorbs, at the price of run-to-run variation in dq's low bits.
//
// Q, dO and the step's lse, D and doc starts are double-buffered in shared memory and filled by
// cp.async one step ahead, so loads overlap the math. Fragments come from shared memory by
// ldmatrix (.trans where a tile is read along its columns). Steps crossing the diagonal (or every
// step, when some query's document starts inside or after the tile) are masked element by element.
#include <algorithm>
#include <atomic>
#include <climits>

#include "engine/ops/cuda/attention_flash_backward.cuh"
#include "engine/ops/cuda/attention_paths.h"
#include "engine/ops/ops.h"

namespace loft::ops::cuda_attention {

namespace {

using namespace flash;

constexpr int kKeys = 128;    // keys per block
constexpr int kQueries = 64;  // queries per step
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarp;
constexpr int kPStride = kKeys + 8;  // P and dS tiles [query][key], padded like the others

template <int D>
struct Tiles {
  static constexpr size_t kQTile = size_t(kQueries) * row_stride<D>();
  static constexpr size_t kPTile = size_t(kQueries) * kPStride;
  // Dynamic shared memory: K, V (kKeys rows); Q, dO (2 buffers each); P, dS; per query and buffer
  // its lse, D and doc start.
  static constexpr size_t kBytes = (2 * kKeys * row_stride<D>() + 4 * kQTile + 2 * kPTile) * sizeof(bf16) +
                                   2 * kQueries * 3 * 4;
};

template <int D>
__global__ void __launch_bounds__(kThreads, 1) flash_backward_kernel(BackwardArgs a) {
  using T = Tiles<D>;
  constexpr int ld = row_stride<D>();
  constexpr int kDv = D / 2, kDq = D / 4;  // head-dim columns of a warp's dK/dV and dQ tiles
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sk = reinterpret_cast<bf16*>(smem);
  bf16* sv = sk + kKeys * ld;
  bf16* sq = sv + kKeys * ld;      // [2][kQueries × ld]
  bf16* sdo = sq + 2 * T::kQTile;  // [2][kQueries × ld]
  bf16* sp = sdo + 2 * T::kQTile;  // [kQueries × kPStride]
  bf16* sds = sp + T::kPTile;      // [kQueries × kPStride]
  float* s_lse = reinterpret_cast<float*>(sds + T::kPTile);  // [2][kQueries], natural log
  float* s_drow = s_lse + 2 * kQueries;                       // [2][kQueries]
  int* s_doc = reinterpret_cast<int*>(s_drow + 2 * kQueries);  // [2][kQueries], raw doc_start
  __shared__ int s_q_end;

  const auto [k0, kvh, split, h0, heads, row0] = key_tile_block<kKeys>(a);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, g = lane / 4, c = lane % 4;
  // Warp tiles: rows (queries) wm·32 and keys wn·32 in products 1 and 3 (3: head-dim columns
  // wn·kDq); keys wn·32 and head-dim columns wd·kDv in product 2.
  const int wm = warp / 4, wn = warp % 4, wd = warp / 4;

  copy_tile_async<D, kThreads>(sk, a.k, row0, k0, kKeys, a.seq, a.hkv, kvh);
  copy_tile_async<D, kThreads>(sv, a.v, row0, k0, kKeys, a.seq, a.hkv, kvh);
  cp_async_commit();

  const StepBuffers bufs{sq, sdo, s_lse, s_drow, s_doc};
  const auto issue = [&](int buf, int h, int q0) { copy_step_async<D, kThreads, kQueries>(a, bufs, row0, buf, h, q0); };
  issue(0, h0, k0);  // the first step: the block's first head, queries from k0
  cp_async_commit();

  bool docs_cut;
  const int steps = steps_per_head<kThreads, kKeys, kQueries>(a, row0, k0, s_q_end, docs_cut);
  const int total = steps * heads;

  float dk[2][kDv / 8][4] = {}, dv[2][kDv / 8][4] = {};  // keys wn·32 + 16·mt.., columns wd·kDv..
  // Step n: query head h0 + n / steps, queries from k0 + (n % steps)·kQueries, buffer n % 2.
  for (int n = 0; n < total; ++n) {
    cp_async_wait<0>();  // this thread's copies of step n (and K, V)
    __syncthreads();     // everyone's are in, and every warp is done with step n − 1
    // Step n + 1's buffers were last read by step n − 1 (its products 2 read Q and dO after the
    // mid-step barrier, so the copies may only start past this one); they load while step n runs.
    if (n + 1 < total) {
      issue((n + 1) & 1, h0 + (n + 1) / steps, k0 + (n + 1) % steps * kQueries);
      cp_async_commit();
    }

    const int buf = n & 1, h = h0 + n / steps, q0 = k0 + n % steps * kQueries;
    const bf16* qt = sq + buf * T::kQTile;
    const bf16* dot = sdo + buf * T::kQTile;

    // 1. S and dP for queries wm·32.. × keys wn·32..; a tile wholly above the diagonal (every
    // key after every query) is P = dS = 0.
    if (q0 + wm * 32 + 31 < k0 + wn * 32) {
      for (int idx = lane; idx < 32 * 16; idx += kWarp) {  // 32 rows × 16 pairs
        const int r = wm * 32 + idx / 16, col = wn * 32 + idx % 16 * 2;
        *reinterpret_cast<uint32_t*>(sp + r * kPStride + col) = 0;
        *reinterpret_cast<uint32_t*>(sds + r * kPStride + col) = 0;
      }
    } else {
      float s[2][4][4] = {}, dp[2][4][4] = {};
#pragma unroll
      for (int kd = 0; kd < D / 16; ++kd) {
        // S, then dP: fragments of one product at a time keep the registers within bounds.
#pragma unroll
        for (int which = 0; which < 2; ++which) {
          uint32_t xa[2][4], yb[2][4];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) load_a(xa[mt], which ? dot : qt, ld, wm * 32 + mt * 16, kd * 16, lane);
#pragma unroll
          for (int np = 0; np < 2; ++np) load_b_rows(yb[np], which ? sv : sk, ld, wn * 32 + np * 16, kd * 16, lane);
          float(&acc)[2][4][4] = which ? dp : s;
#pragma unroll
          for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int np = 0; np < 2; ++np) mma2(acc[mt][2 * np], acc[mt][2 * np + 1], xa[mt], yb[np]);
        }
      }
      // P = exp(S − lse) where visible, dS = P ∘ (dP − D) · scale. Queries past seq need no mask:
      // their Q, dO, lse and D are zeros, so their dS is 0 and their dO rows add nothing.
      const bool masked = docs_cut || q0 < k0 + kKeys - 1;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int qr = wm * 32 + mt * 16 + g + 8 * r, qi = buf * kQueries + qr, i = q0 + qr;
          const float lse = s_lse[qi] * kLog2e, drow = s_drow[qi];
          const int fk = masked ? min(max(s_doc[qi], 0), i) : 0;
#pragma unroll
          for (int nt = 0; nt < 4; ++nt) {
            const int kc = wn * 32 + nt * 8 + 2 * c;
            float p[2], ds[2];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              p[e] = exp2_fast(s[mt][nt][2 * r + e] * a.scale_log2 - lse);
              if (masked) {
                const int j = k0 + kc + e;
                if (i >= a.seq || j > i || j < fk) p[e] = 0.0f;
              }
              ds[e] = p[e] * (dp[mt][nt][2 * r + e] - drow) * a.scale;
            }
            *reinterpret_cast<uint32_t*>(sp + qr * kPStride + kc) = pack(p[0], p[1]);
            *reinterpret_cast<uint32_t*>(sds + qr * kPStride + kc) = pack(ds[0], ds[1]);
          }
        }
    }
    __syncthreads();  // P and dS complete

    // 2. dV += Pᵀ·dO and dK += dSᵀ·Q for keys wn·32.. × columns wd·kDv.. (k-steps of 16 queries);
    // nothing to add when every query of the step comes before the warp's first key.
    if (q0 + kQueries - 1 >= k0 + wn * 32) {
#pragma unroll
      for (int kq = 0; kq < kQueries / 16; ++kq) {
        uint32_t pa[2][4], dsa[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          load_a_trans(pa[mt], sp, kPStride, kq * 16, wn * 32 + mt * 16, lane);
          load_a_trans(dsa[mt], sds, kPStride, kq * 16, wn * 32 + mt * 16, lane);
        }
#pragma unroll
        for (int nd = 0; nd < kDv / 8; nd += 2) {
          uint32_t ob[4], qb[4];
          load_b_cols(ob, dot, ld, kq * 16, wd * kDv + nd * 8, lane);
          load_b_cols(qb, qt, ld, kq * 16, wd * kDv + nd * 8, lane);
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            mma2(dv[mt][nd], dv[mt][nd + 1], pa[mt], ob);
            mma2(dk[mt][nd], dk[mt][nd + 1], dsa[mt], qb);
          }
        }
      }
    }

    // 3. dQ[queries wm·32.. × columns wn·kDq..] += dS·K over the keys up to the rows' last query,
    // then into the fp32 accumulator.
    float dq[2][kDq / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      if (k0 + kk * 16 > q0 + wm * 32 + 31) break;  // these keys come after every row's query
      uint32_t dsa[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) load_a(dsa[mt], sds, kPStride, wm * 32 + mt * 16, kk * 16, lane);
#pragma unroll
      for (int nd = 0; nd < kDq / 8; nd += 2) {
        uint32_t kb[4];
        load_b_cols(kb, sk, ld, kk * 16, wn * kDq + nd * 8, lane);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) mma2(dq[mt][nd], dq[mt][nd + 1], dsa[mt], kb);
      }
    }
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = q0 + wm * 32 + mt * 16 + g + 8 * r;
        if (i >= a.seq) continue;
        float* dst = a.dq + ((row0 + i) * a.hq + h) * D + wn * kDq + 2 * c;
#pragma unroll
        for (int nd = 0; nd < kDq / 8; ++nd) atomic_add2(dst + nd * 8, dq[mt][nd][2 * r], dq[mt][nd][2 * r + 1]);
      }
  }

#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      store_dk_dv(a, row0, kvh, D, k0 + wn * 32 + mt * 16 + g + 8 * r, wd * kDv + 2 * c, dk[mt], dv[mt], r, split,
                  int64_t(gridDim.y) * a.seq);
}

// dk, dv = the splits' fp32 partials summed in split order, rounded once; two elements a thread.
__global__ void sum_partials_kernel(const float* dk_part, const float* dv_part, bf16* dk, bf16* dv, int splits,
                                    int64_t n) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 2;
  if (i >= n) return;
  float2 k = make_float2(0.0f, 0.0f), v = k;
  for (int s = 0; s < splits; ++s) {
    const float2 pk = *reinterpret_cast<const float2*>(dk_part + s * n + i);
    const float2 pv = *reinterpret_cast<const float2*>(dv_part + s * n + i);
    k.x += pk.x, k.y += pk.y, v.x += pv.x, v.y += pv.y;
  }
  *reinterpret_cast<uint32_t*>(dk + i) = pack(k.x, k.y);
  *reinterpret_cast<uint32_t*>(dv + i) = pack(v.x, v.y);
}

// How many blocks share a kv head's group: one per group while the grid (kv heads × rows × key
// tiles) fills two blocks an SM; else enough to, each split's partials (2·T·Hkv·D floats) bounded
// by dq's fp32 accumulator (T·Hq·D floats), so at most group / 2 splits. At 4 × 512 tokens this is
// Qwen2.5-7B's 4 kv heads (64 blocks for 132 SMs: 3 splits) and Llama-3-8B's 8 (2 splits).
int splits_for(int64_t blocks, int group, int sms) {
  if (group < 2 || blocks >= 2 * int64_t(sms)) return 1;
  const int64_t want = (2 * int64_t(sms) + blocks - 1) / blocks;
  const int splits = int(std::min<int64_t>(want, std::max(1, group / 2)));
  const int per = (group + splits - 1) / splits;
  return (group + per - 1) / per;  // no split left empty
}

template <int D>
void launch(const BackwardArgs& args, dim3 grid, int device) {
  launch_backward(flash_backward_kernel<D>, Tiles<D>::kBytes, grid, kThreads, args, device, "attention flash_backward");
}

// 0: the device's own limit (set_flash_shared_limit, for tests).
std::atomic<size_t> shared_limit{0};

}  // namespace

size_t flash_set_shared_limit(size_t bytes) { return shared_limit.exchange(bytes); }

// The 128-key grid where the device gives a block the shared memory its layout takes (sm_90: 227
// KiB), on wgmma where hopper_backward_supports; else the 64-key kernel (sm_86/89/120: 99 KiB;
// sm_80: 163 KiB).
FlashBackwardKernel flash_backward_kernel_for(const Tensor& q) {
  const int d = int(q.size(2));
  size_t limit = size_t(cuda_kernels::max_shared_optin(q.device().index));
  if (const size_t set = shared_limit.load()) limit = std::min(limit, set);
  if (limit < (d == 64 ? Tiles<64>::kBytes : Tiles<128>::kBytes)) return FlashBackwardKernel::keys64;
  return d == 128 && hopper_backward_supports(q) ? FlashBackwardKernel::hopper : FlashBackwardKernel::keys128;
}

void flash_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                    const Tensor& out, const Tensor& lse, const Tensor& doc_start, int64_t seq,
                    float scale, Tensor& dq, Tensor& dk, Tensor& dv) {
  const int device = cuda_kernels::use_device(q);
  const Device dev = q.device();
  Tensor drow = Tensor::empty({q.size(0), q.size(1)}, DType::F32, dev);
  softmax_row_dot(dout, out, drow);
  Tensor dq32 = Tensor::empty(q.shape(), DType::F32, dev);
  dq32.zero_();

  const BackwardArgs args{q.ptr<bf16>(),
                          k.ptr<bf16>(),
                          v.ptr<bf16>(),
                          dout.ptr<bf16>(),
                          lse.ptr<float>(),
                          drow.ptr<float>(),
                          doc_start.ptr<int32_t>(),
                          dq32.ptr<float>(),
                          dk.ptr<bf16>(),
                          dv.ptr<bf16>(),
                          int(seq),
                          int(q.size(1)),
                          int(k.size(1)),
                          int(q.size(1) / k.size(1)),
                          scale,
                          scale * kLog2e};
  const int rows = int(q.size(0) / seq), d = int(q.size(2));
  const FlashBackwardKernel kernel = flash_backward_kernel_for(q);
  if (kernel != FlashBackwardKernel::keys64) {
    // Key tiles in z (at most 65535: flash_supports), heaviest first.
    const int64_t tiles = (seq + kKeys - 1) / kKeys, hkv = k.size(1);
    BackwardArgs a = args;
    a.splits = splits_for(hkv * rows * tiles, a.group, cuda_kernels::sm_count(device));
    a.heads_per_block = (a.group + a.splits - 1) / a.splits;
    Tensor parts;
    if (a.splits > 1) {
      parts = Tensor::empty({2, a.splits, k.numel()}, DType::F32, dev);
      a.dk_part = parts.ptr<float>(), a.dv_part = a.dk_part + a.splits * k.numel();
    }
    const dim3 grid(unsigned(hkv * a.splits), unsigned(rows), unsigned(tiles));
    if (d == 64)
      launch<64>(a, grid, device);
    else if (kernel == FlashBackwardKernel::hopper)
      flash::launch_backward_hopper(a, grid, device);
    else
      launch<128>(a, grid, device);
    if (a.splits > 1) {
      const int64_t n = k.numel();  // even: head dim 64 or 128
      sum_partials_kernel<<<unsigned((n / 2 + 255) / 256), 256, 0, loft::cuda::stream(device)>>>(
          a.dk_part, a.dv_part, dk.ptr<bf16>(), dv.ptr<bf16>(), a.splits, n);
      loft::cuda::check_launch("attention flash_backward partials");
    }
  } else {
    flash::launch_backward_small(args, d, rows, device);
  }
  ops::convert(dq32, dq);
}

}  // namespace loft::ops::cuda_attention
