// Flash attention backward on Hopper's warpgroup MMA (wgmma, sm_90a), head dim 128: what
// flash_backward runs on an H100/H200 when the build has sm_90a code (hopper_backward_supports);
// the mma.sync kernels (attention_flash_backward.cu, _small.cu) stay the path of every other GPU.
//
// Why: on Hopper the mma.sync backward reached 227 TFLOP/s at 4 × 4096 where FlashAttention-2
// reaches 261; wgmma reads its operands straight from shared memory (or one from registers),
// 64×N×16 per instruction, as the Hopper forward does (attention_flash_forward_hopper.cu).
//
// The grid, the steps and the split of a kv head's group are the 128-key kernel's
// (attention_flash_backward.cu): one block per (key tile of 128, kv head × split, batch row), which
// accumulates the tile's dK and dV in registers over every query head of its share of the group
// and every step of 64 queries that can see the tile; dQ is added into an fp32 buffer.
// Three warpgroups, as FlashAttention-3 splits the work:
// - warpgroup 0 is the producer: after lowering its registers, one thread loads K and V once and
//   each step's Q and dO with TMA (hopper_async.cuh), and one warp copies the step's lse, D and doc
//   starts, into double buffers, each with a "full" barrier (bytes landed, stats stored) and an
//   "empty" one (both consumers are done with it);
// - warpgroups 1 and 2 are the consumers; consumer w owns keys 64w..64w + 63 of the tile, and
//   FlashAttention-3's transposed products keep each one's work to its own keys:
//   1. Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ [64 keys × 64 queries]: 8 SS MMAs each over head dim 128.
//   2. Pᵀ = exp(Sᵀ − lse) and dSᵀ = Pᵀ ∘ (dPᵀ − D) · scale in registers; rows are keys, so both,
//      rounded to bf16, are the register A operands of
//   3. dV += Pᵀ·dO and dK += dSᵀ·Q [64 keys × 128]: 4 RS MMAs each (dO and Q read transposed).
//   4. dSᵀ to shared memory (double-buffered); after the consumers meet at a named barrier,
//      dQ = dS·K [64 queries × 128], consumer w taking head-dim columns 64w..: 8 SS MMAs over the
//      tile's 128 keys (dS and K read transposed), handed through shared memory to
// - a third producer warp, which adds each step's dQ into the fp32 buffer with bulk reductions
//   (one 512-byte row a lane at a time) instead of 4,096 atomics a step from the consumers.
// All tiles use the 128-byte swizzle (wgmma.cuh). Steps crossing the diagonal (or every step, when
// some query's document starts inside or after the tile) are masked element by element.
#include <atomic>

#include "engine/ops/cuda/attention_flash_backward.cuh"
#include "engine/ops/cuda/attention_hopper.cuh"
#include "engine/ops/cuda/attention_paths.h"
#include "engine/ops/cuda/head_tile_map.h"
#include "engine/ops/cuda/hopper_async.cuh"

namespace loft::ops::cuda_attention {

namespace {

using namespace flash;
using hopper::head_dim_step;
using hopper::row_step;

namespace sync = hopper_async;

constexpr int kD = 128;
constexpr int kKeys = 128;                     // keys per block, 64 per consumer warpgroup
constexpr int kQueries = 64;                   // queries per step
constexpr int kThreads = 384;                  // the producer warpgroup and two consumers
constexpr int kKHalf = kKeys * 128;            // one 64-column half of the K (or V) tile: 16 KiB
constexpr int kKTile = 2 * kKHalf;             // K or V: 32 KiB
constexpr int kQHalf = kQueries * 128;         // one half of a Q (or dO) buffer: 8 KiB
constexpr int kQTile = 2 * kQHalf;             // one Q or dO buffer: 16 KiB
constexpr int kDsBytes = kKeys * kQueries * 2; // one dSᵀ buffer [key][query] bf16: 16 KiB
constexpr int kDqStride = kD + 4;              // floats per row of the dQ hand-off (bank shift, 16-byte rows)
constexpr int kDqBytes = kQueries * kDqStride * 4;
constexpr int kStatsBytes = 2 * kQueries * 3 * 4;  // lse, D, doc start per query and buffer
// Registers a thread after the split (128·40 + 256·232 fits the 64K a block of 384 holds at 168;
// the producer spills at 24).
constexpr int kProducerRegs = 40, kConsumerRegs = 232;
// Barriers (8 bytes each): K and V landed; full ×2 (the TMA thread and the stats warp's 32 lanes
// arrive), empty ×2 (lane 0 of each consumer warp arrives); dQ handed over (lane 0 of each
// consumer warp), dQ read out (the writer warp's lane 0).
constexpr int kBarriers = 7, kFullArrivals = 1 + 32, kEmptyArrivals = 8;
// K, V, Q ×2, dO ×2, dSᵀ ×2, dQ, the stats, the barriers, and slack to align the tiles to 1024.
constexpr size_t kSmemBytes =
    2 * kKTile + 4 * kQTile + 2 * kDsBytes + kDqBytes + kStatsBytes + 8 * kBarriers + 1024;
constexpr int kDsBarrier = 1;  // named: both consumers' dSᵀ rows of a step are in

#ifdef LOFT_WGMMA  // the helpers exist only where the kernel has a body (sm_90a code)
// Issues X·Yᵀ for the warpgroup's 64 rows of a K or V tile (x_desc) against the 64 rows of a Q or
// dO buffer (y_desc), over head dim 128; the caller fences before and commits after.
__device__ __forceinline__ void issue_transposed_scores(float (&acc)[32], uint64_t x_desc, uint64_t y_desc) {
#pragma unroll
  for (int ks = 0; ks < kD / 16; ++ks)
    wgmma::mma_ss_n64<0, 0>(acc, x_desc + head_dim_step(ks, kKHalf), y_desc + head_dim_step(ks, kQHalf), ks > 0);
}

// A block's steps in order (producer and consumers walk them alike): `steps` steps of kQueries
// queries per query head, each head's from k0.
struct StepWalk {
  int h, q0;
  __device__ __forceinline__ void next(int k0, int steps) {
    if (q0 + kQueries >= k0 + steps * kQueries) ++h, q0 = k0;
    else q0 += kQueries;
  }
};

// The producer's TMA thread: K and V once, then each step's Q and dO into buffer n % 2 once both
// consumers have emptied it (the n-th fill of a buffer, n / 2, waits for the empty phase of parity
// (n / 2 − 1) & 1: the first fill passes at once).
__device__ void produce_tiles(const CUtensorMap* qm, const CUtensorMap* km, const CUtensorMap* vm,
                              const CUtensorMap* dom, uint32_t sk, uint32_t sv, uint32_t sq, uint32_t sdo,
                              uint32_t kv_full, uint32_t full, uint32_t empty, int kvh, int k0, int row, int h0,
                              int steps, int total) {
  sync::arrive_expect_bytes(kv_full, 2 * kKTile);
  hopper::load_head_tile(sk, kKHalf, km, kvh, k0, row, kv_full);
  hopper::load_head_tile(sv, kKHalf, vm, kvh, k0, row, kv_full);
  StepWalk at{h0, k0};
  for (int n = 0; n < total; ++n, at.next(k0, steps)) {
    const int b = n & 1;
    sync::wait(empty + 8 * b, (n / 2 & 1) ^ 1);
    sync::arrive_expect_bytes(full + 8 * b, 2 * kQTile);
    hopper::load_head_tile(sq + b * kQTile, kQHalf, qm, at.h, at.q0, row, full + 8 * b);
    hopper::load_head_tile(sdo + b * kQTile, kQHalf, dom, at.h, at.q0, row, full + 8 * b);
  }
}

// The producer's stats warp: each step's lse, D and raw doc start per query (zeros past seq) into
// buffer n % 2, then one arrival per lane on its full barrier (the arrival orders the stores
// before the consumers' wait).
__device__ void produce_stats(const BackwardArgs& a, const StepBuffers& st, uint32_t full, uint32_t empty,
                              int64_t row0, int k0, int h0, int steps, int total, int lane) {
  StepWalk at{h0, k0};
  for (int n = 0; n < total; ++n, at.next(k0, steps)) {
    const int b = n & 1;
    sync::wait(empty + 8 * b, (n / 2 & 1) ^ 1);
#pragma unroll
    for (int e = 0; e < kQueries / 32; ++e) {
      const int i = at.q0 + lane + 32 * e, slot = b * kQueries + lane + 32 * e;
      const bool in = i < a.seq;
      const int64_t t = row0 + (in ? i : 0), th = t * a.hq + at.h;
      st.lse[slot] = in ? a.lse[th] : 0.0f;
      st.drow[slot] = in ? a.drow[th] : 0.0f;
      st.doc[slot] = in ? a.doc_start[t] : 0;
    }
    sync::arrive(full + 8 * b);
  }
}

// The producer's dQ warp: each step's dQ [kQueries × 128] from the hand-off tile into the fp32
// buffer, lane l adding rows l and l + 32 (queries past seq are not written), then the tile is
// handed back once the bulk operations have read it.
__device__ void write_dq(const BackwardArgs& a, uint32_t sdq, uint32_t dq_full, uint32_t dq_empty, int64_t row0,
                         int k0, int h0, int steps, int total, int lane) {
  StepWalk at{h0, k0};
  for (int n = 0; n < total; ++n, at.next(k0, steps)) {
    sync::wait(dq_full, n & 1);
#pragma unroll
    for (int e = 0; e < kQueries / 32; ++e) {
      const int r = lane + 32 * e;
      if (at.q0 + r < a.seq)
        sync::reduce_add_bulk(a.dq + ((row0 + at.q0 + r) * a.hq + at.h) * kD, sdq + r * kDqStride * 4, kD * 4);
    }
    sync::bulk_commit();
    sync::bulk_wait<0, true>();
    __syncwarp();
    if (lane == 0) sync::arrive(dq_empty);
  }
  sync::bulk_wait<0, false>();
}

#endif  // LOFT_WGMMA

__global__ void __launch_bounds__(kThreads, 1)
    flash_backward_hopper_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                                 const __grid_constant__ CUtensorMap v_map,
                                 const __grid_constant__ CUtensorMap do_map, BackwardArgs a) {
#ifdef LOFT_WGMMA
  extern __shared__ __align__(16) uint8_t smem_raw[];
  uint8_t* const base = hopper::align_1024(smem_raw);
  // Buffer b of Q at sq + b·kQTile, of dO at sdo + b·kQTile, of dSᵀ at ds + b·kDsBytes.
  const uint32_t sk = smem_address(base), sv = sk + kKTile, sq = sv + kKTile, sdo = sq + 2 * kQTile;
  uint8_t* const ds_tiles = base + 2 * kKTile + 4 * kQTile;  // dSᵀ: 128 rows (keys) of 64 queries
  float* const s_dq = reinterpret_cast<float*>(ds_tiles + 2 * kDsBytes);  // [kQueries][kDqStride]
  float* const s_lse = s_dq + kQueries * kDqStride;                         // [2][kQueries], natural log
  float* const s_drow = s_lse + 2 * kQueries;                                // [2][kQueries]
  int* const s_doc = reinterpret_cast<int*>(s_drow + 2 * kQueries);          // [2][kQueries], raw doc_start
  const uint32_t kv_full = smem_address(s_doc + 2 * kQueries), full = kv_full + 8, empty = kv_full + 24,
                 dq_full = kv_full + 40, dq_empty = kv_full + 48;
  __shared__ int s_q_end;

  const auto [k0, kvh, split, h0, heads, row0] = key_tile_block<kKeys>(a);
  const int wg = threadIdx.x / 128, warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4;

  if (threadIdx.x == 0) {
    sync::barrier_init(kv_full, 1);
    for (int b = 0; b < 2; ++b) {
      sync::barrier_init(full + 8 * b, kFullArrivals);
      sync::barrier_init(empty + 8 * b, kEmptyArrivals);
    }
    sync::barrier_init(dq_full, kEmptyArrivals);
    sync::barrier_init(dq_empty, 1);
    sync::barriers_initialised();
  }
  bool docs_cut;  // (its barriers also publish the initialised mbarriers)
  const int steps = steps_per_head<kThreads, kKeys, kQueries>(a, row0, k0, s_q_end, docs_cut);
  const int total = steps * heads;
  const StepBuffers stats{nullptr, nullptr, s_lse, s_drow, s_doc};

  if (wg == 0) {
    sync::lower_registers<kProducerRegs>();
    if (total > 0 && threadIdx.x == 0)
      produce_tiles(&q_map, &k_map, &v_map, &do_map, sk, sv, sq, sdo, kv_full, full, empty, kvh, k0,
                    int(blockIdx.y), h0, steps, total);
    else if (warp == 1)
      produce_stats(a, stats, full, empty, row0, k0, h0, steps, total, lane);
    else if (warp == 2)
      write_dq(a, smem_address(s_dq), dq_full, dq_empty, row0, k0, h0, steps, total, lane);
    return;
  }
  sync::raise_registers<kConsumerRegs>();
  const int w = wg - 1;  // consumer 0 or 1: keys 64w..64w + 63 of the tile

  // This thread's keys (block-local): accumulator rows g and g + 8 of its warp's 16.
  const int key_lo = w * 64 + warp * 16 + g;
  const uint64_t k_rows = wgmma::descriptor(sk + w * 64 * 128, 16);  // K-major A of Sᵀ
  const uint64_t v_rows = wgmma::descriptor(sv + w * 64 * 128, 16);  // K-major A of dPᵀ
  const uint64_t q_kmajor = wgmma::descriptor(sq, 16), do_kmajor = wgmma::descriptor(sdo, 16);
  const uint64_t q_mn = wgmma::descriptor(sq, kQHalf), do_mn = wgmma::descriptor(sdo, kQHalf);
  const uint64_t ds_mn = wgmma::descriptor(smem_address(ds_tiles), 16);  // A of dQ (one 64-query atom)
  const uint64_t k_cols = wgmma::descriptor(sk + w * kKHalf, 16);        // B of dQ: head-dim half w
  constexpr uint32_t kBufStep = kQTile >> 4, kDsStep = kDsBytes >> 4;  // one buffer on, in descriptor units

  float dk[64] = {}, dv[64] = {};
  if (total > 0) sync::wait(kv_full, 0);
  // Step n: query head h, queries from q0 (h0 + n / steps and k0 + (n % steps)·kQueries), buffer
  // n % 2.
  StepWalk at{h0, k0};
  for (int n = 0; n < total; ++n, at.next(k0, steps)) {
    const int buf = n & 1, q0 = at.q0;
    sync::wait(full + 8 * buf, n / 2 & 1);

    // 1. Sᵀ and dPᵀ.
    float s[32], dp[32];
    wgmma::fence();
    issue_transposed_scores(s, k_rows, q_kmajor + buf * kBufStep);
    wgmma::commit();
    issue_transposed_scores(dp, v_rows, do_kmajor + buf * kBufStep);
    wgmma::commit();

    // 2. Pᵀ (this thread: keys key_lo + 8r, queries q0 + 8i + 2c + e at s[4i + 2r + e]), then dSᵀ.
    // Queries past seq need no mask: their Q, dO, lse and D are zeros, so their dS is 0 and their
    // dO rows add nothing.
    const bool masked = docs_cut || q0 < k0 + kKeys - 1;
    wgmma::wait<1>();
    wgmma::fence_operands(s);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int qc = 8 * i + 2 * c, qi = buf * kQueries + qc;
      const float2 lse = *reinterpret_cast<const float2*>(s_lse + qi);
      const int2 doc = masked ? *reinterpret_cast<const int2*>(s_doc + qi) : make_int2(0, 0);
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int query = q0 + qc + e;
        const float lse2 = (e ? lse.y : lse.x) * kLog2e;
        const int fk = min(max(e ? doc.y : doc.x, 0), query);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float& p = s[4 * i + 2 * r + e];
          p = exp2_fast(p * a.scale_log2 - lse2);
          if (masked) {
            const int key = k0 + key_lo + 8 * r;
            if (query >= a.seq || key > query || key < fk) p = 0.0f;
          }
        }
      }
    }
    wgmma::wait<0>();
    wgmma::fence_operands(dp);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float2 drow = *reinterpret_cast<const float2*>(s_drow + buf * kQueries + 8 * i + 2 * c);
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int at_ = 4 * i + 2 * r + e;
          dp[at_] = s[at_] * (dp[at_] - (e ? drow.y : drow.x)) * a.scale;
        }
    }

    // 3. dSᵀ (bf16, as rounded for dK) into buffer n % 2 of its swizzled tiles: row = key, 16-byte
    // chunk i (queries 8i..8i + 7) at chunk i ^ (row % 8). Its last reader, step n − 2's dQ, was
    // waited for by both consumers before they met at step n − 1's barrier.
    uint32_t pa[kQueries / 16][4], dsa[kQueries / 16][4];
    hopper::accumulator_to_a(pa, s);
    hopper::accumulator_to_a(dsa, dp);
    uint8_t* const ds_tile = ds_tiles + buf * kDsBytes;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = key_lo + 8 * r;
#pragma unroll
      for (int i = 0; i < 8; ++i)
        *reinterpret_cast<uint32_t*>(ds_tile + row * 128 + ((i ^ (row & 7)) << 4) + 4 * c) = dsa[i / 2][2 * (i % 2) + r];
    }
    wgmma::fence_proxy_async();
    sync::named_sync(kDsBarrier, 256);  // both consumers' dSᵀ rows are in

    // 4. dQ for head-dim columns 64·w.. over all 128 keys; then dV += Pᵀ·dO and dK += dSᵀ·Q, which
    // run while dQ goes to the hand-off tile (once the writer has read the previous step's).
    float dq[32];
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk)
      wgmma::mma_ss_n64<1, 1>(dq, ds_mn + buf * kDsStep + row_step(kk), k_cols + row_step(kk), kk > 0);
    wgmma::commit();
#pragma unroll
    for (int kk = 0; kk < kQueries / 16; ++kk) wgmma::mma_rs_mn(dv, pa[kk], do_mn + buf * kBufStep + row_step(kk));
#pragma unroll
    for (int kk = 0; kk < kQueries / 16; ++kk) wgmma::mma_rs_mn(dk, dsa[kk], q_mn + buf * kBufStep + row_step(kk));
    wgmma::commit();
    wgmma::wait<1>();
    wgmma::fence_operands(dq);
    sync::wait(dq_empty, (n & 1) ^ 1);
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int i = 0; i < 8; ++i)
        *reinterpret_cast<float2*>(s_dq + (warp * 16 + g + 8 * r) * kDqStride + w * 64 + 8 * i + 2 * c) =
            make_float2(dq[4 * i + 2 * r], dq[4 * i + 2 * r + 1]);
    wgmma::fence_proxy_async();  // the bulk reductions read it through the async proxy
    __syncwarp();
    if (lane == 0) sync::arrive(dq_full);
    wgmma::wait<0>();  // dV and dK read this step's Q and dO buffers
    wgmma::fence_operands(dv);
    wgmma::fence_operands(dk);
    if (lane == 0) sync::arrive(empty + 8 * buf);
  }

  // dk/dv rows: keys k0 + key_lo + 8r; the m64n128 accumulator is store_dk_dv's 16 n-tiles of 4.
#pragma unroll
  for (int r = 0; r < 2; ++r)
    store_dk_dv(a, row0, kvh, kD, k0 + key_lo + 8 * r, 2 * c, reinterpret_cast<const float(&)[16][4]>(dk),
                reinterpret_cast<const float(&)[16][4]>(dv), r, split, int64_t(gridDim.y) * a.seq);
#else
  __trap();  // hopper_backward_supports launches this only where sm_90a code exists
#endif
}

std::atomic<bool> hopper_allowed{true};

}  // namespace

bool flash_set_hopper_backward(bool allowed) { return hopper_allowed.exchange(allowed); }

bool hopper_backward_supports(const Tensor& q) {
  return hopper_allowed.load() && q.size(2) == kD && hopper_kernel_runs_on(q.device().index, kSmemBytes);
}

namespace flash {

void launch_backward_hopper(const BackwardArgs& a, dim3 grid, int device) {
  const int64_t rows = grid.y;
  const CUtensorMap qm = head_tile_map(a.q, rows, a.seq, a.hq, kQueries),
                    dom = head_tile_map(a.dout, rows, a.seq, a.hq, kQueries),
                    km = head_tile_map(a.k, rows, a.seq, a.hkv, kKeys),
                    vm = head_tile_map(a.v, rows, a.seq, a.hkv, kKeys);
  cuda_kernels::allow_dynamic_smem(flash_backward_hopper_kernel, kSmemBytes, device);
  flash_backward_hopper_kernel<<<grid, kThreads, kSmemBytes, loft::cuda::stream(device)>>>(qm, km, vm, dom, a);
  loft::cuda::check_launch("attention flash_backward_hopper");
}

}  // namespace flash

}  // namespace loft::ops::cuda_attention
