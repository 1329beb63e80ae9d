// Flash attention forward on Hopper's warpgroup MMA (wgmma, sm_90a), head dim 128: what
// flash_forward runs on an H100/H200 when the build has sm_90a code (hopper_forward_supports); the
// mma.sync kernel (attention_flash_forward.cu) stays the path of every other GPU.
//
// Why: mma.sync on Hopper issues from registers filled by ldmatrix, and at head dim 128 that
// kernel reached 263 TFLOP/s where FlashAttention-2 reaches 325 on an H200; wgmma reads both
// operands of Q·Kᵀ and V of P·V straight from shared memory, 64×128×16 per instruction
// (docs/perf-journal.md, sessions 17 and 27).
//
// One block per (query tile of 128 rows, query head, batch row), three warpgroups, as
// FlashAttention-3 splits the work:
// - warpgroup 0 is the producer: after lowering its registers, one thread loads Q once and K and
//   V tile by tile with TMA (hopper_async.cuh) into double buffers, each buffer with a "full"
//   barrier (its bytes landed) and an "empty" one (both consumers' MMAs are done reading it);
// - warpgroups 1 and 2 are the consumers, 64 query rows each. Per key tile: S = Q·Kᵀ (8 SS MMAs
//   over head dim 128), the online softmax in registers (fp32, log2 domain, as the mma.sync
//   kernel), O += P·V with P rounded to bf16 straight from the S accumulators (8 RS MMAs). P·V of
//   one tile is issued with S of the next and runs while that tile's softmax does; and the two
//   consumers take turns issuing (two named barriers), so one's softmax runs while the other's
//   MMAs do.
// Key tiles of 128 run from the diagonal down to the tile's earliest document start, as in the
// mma.sync kernel; every tile sits in shared memory in the 128-byte swizzle (wgmma.cuh).
#include <atomic>
#include <climits>

#include "engine/ops/cuda/attention_hopper.cuh"
#include "engine/ops/cuda/attention_paths.h"
#include "engine/ops/cuda/head_tile_map.h"
#include "engine/ops/cuda/hopper_async.cuh"

namespace loft::ops::cuda_attention {

namespace {

using namespace flash;
namespace sync = hopper_async;

constexpr int kD = 128;
constexpr int kRows = 128;                 // query rows per block, 64 per consumer warpgroup
constexpr int kKeys = 128;                 // keys per tile
constexpr int kThreads = 384;              // the producer warpgroup and two consumers
constexpr int kHalfBytes = kRows * 128;    // one 64-column half of a 128-row tile: 16 KiB
constexpr int kTileBytes = 2 * kHalfBytes; // a 128-row tile of head dim 128: 32 KiB
constexpr int kOutStride = kD + 8;         // bf16 per row of the output staging (bank shift)
constexpr int kOutBytes = kRows * kOutStride * 2;
// Registers a thread after the split: the producer's few, the consumers' many (128·24 + 256·240
// fits the 64K a block of 384 threads holds at 168 each).
constexpr int kProducerRegs = 24, kConsumerRegs = 240;
// Barriers (8 bytes each): Q full; K full ×2, K empty ×2, V full ×2, V empty ×2.
constexpr int kBarriers = 9;
// Q, K ×2, V ×2, the output staging, the rows' first keys and their min/max, the barriers, and
// slack to align the tiles to 1024.
constexpr size_t kSmemBytes = 5 * kTileBytes + kOutBytes + (kRows + 2) * sizeof(int) + 8 * kBarriers + 1024;
static_assert(kKeys == kRows, "a query tile's diagonal is one key tile, which starts at its first row");
static_assert((5 * kTileBytes + kOutBytes + (kRows + 2) * sizeof(int)) % 8 == 0, "barriers 8-byte aligned");
// Named barriers: 1 and 2 hand the MMA turn to consumer 0 and 1; 3 and 4 close each consumer's
// output staging.
constexpr int kTurnBarrier = 1, kStagingBarrier = 3;

struct HopperArgs {
  const int32_t* doc_start;
  bf16* out;
  float* lse;
  int seq, hq, hkv, group;
  float scale_log2;
};

#ifdef LOFT_WGMMA  // the helpers exist only where the kernel has a body (sm_90a code)
// Issues S = Q·Kᵀ for the warpgroup's 64 rows × the tile's 128 keys (8 k-steps over head dim
// 128: 4 in each 64-column half). The caller fences before and commits after.
// q_desc and k_desc describe the tiles' first k-step.
__device__ __forceinline__ void issue_scores(float (&s)[64], uint64_t q_desc, uint64_t k_desc) {
#pragma unroll
  for (int ks = 0; ks < kD / 16; ++ks) {
    const uint32_t off = hopper::head_dim_step(ks, kHalfBytes);
    wgmma::mma_ss(s, q_desc + off, k_desc + off, ks > 0);
  }
}

// Issues O += P·V over the tile's 128 keys (8 k-steps of 16 keys); V is read transposed, its two
// 64-column halves kHalfBytes apart.
__device__ __forceinline__ void issue_pv(float (&o)[64], const uint32_t (&p)[kKeys / 16][4], uint64_t v_desc) {
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) wgmma::mma_rs_mn(o, p[kk], v_desc + hopper::row_step(kk));
}

// One tile's raw scores (this thread: rows `row` and row + 8, keys k0 + 8j + 2c + {0, 1}) to
// unnormalised probabilities in place: the causal and document masks where the tile needs them
// (the diagonal tile, tiles before some row's document start), then the online softmax in the log2
// domain (the scale folded into the exponent's FMA), as the mma.sync kernel computes it. m and l
// advance; alpha is the factor O must be scaled by.
__device__ __forceinline__ void online_softmax(float (&s)[64], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                               float scale_log2, int k0, int row, const int (&fk_row)[2],
                                               int c, int fk_max) {
  if (k0 + kKeys - 1 > row - row % 64 || k0 < fk_max) {
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      const int r = i / 2 % 2, key = k0 + i / 4 * 8 + 2 * c + i % 2;
      if (key < fk_row[r] || key > row + 8 * r) s[i] = -INFINITY;
    }
  }
  float base[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < 16; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 1));  // the 4 lanes of a row hold its 128 keys
    mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 2));
    const float m_new = fmaxf(m[r], mx * scale_log2);
    // A row with nothing visible yet keeps max −inf; exponentiate against 0 to avoid inf − inf.
    base[r] = m_new == -INFINITY ? 0.0f : m_new;
    alpha[r] = exp2_fast(m[r] - base[r]);
    m[r] = m_new;
  }
  float row_sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const float e = exp2_fast(fmaf(s[i], scale_log2, -base[i / 2 % 2]));
    s[i] = e;
    row_sum[i / 2 % 2] += e;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) l[r] = l[r] * alpha[r] + row_sum[r];  // quad-partial sums
}

// The barriers (8 bytes each, from shared address `base`): Q landed; K landed ×2, K emptied ×2,
// V landed ×2, V emptied ×2 (buffer b's at + 8b).
struct Barriers {
  uint32_t q_full, k_full, k_empty, v_full, v_empty;
  __device__ explicit Barriers(uint32_t base)
      : q_full(base), k_full(base + 8), k_empty(base + 24), v_full(base + 40), v_empty(base + 56) {}
};

// The producer (one thread): Q and K of the diagonal tile, then K of tile t + 1 and V of tile t for
// every t, each into its buffer once the consumers have emptied it. The n-th fill of a buffer
// (n = t / 2) waits for the empty phase of parity (n − 1) & 1: the first fill passes at once.
__device__ void produce(const CUtensorMap* qm, const CUtensorMap* km, const CUtensorMap* vm, uint32_t sq,
                        uint32_t sk, uint32_t sv, const Barriers& bar, int h, int kvh, int q0, int row, int tiles) {
  sync::arrive_expect_bytes(bar.q_full, kTileBytes);
  hopper::load_head_tile(sq, kHalfBytes, qm, h, q0, row, bar.q_full);
  sync::arrive_expect_bytes(bar.k_full, kTileBytes);
  hopper::load_head_tile(sk, kHalfBytes, km, kvh, q0, row, bar.k_full);
  for (int t = 0; t < tiles; ++t) {
    if (t + 1 < tiles) {
      const int b = (t + 1) % 2;
      sync::wait(bar.k_empty + 8 * b, ((t + 1) / 2 & 1) ^ 1);
      sync::arrive_expect_bytes(bar.k_full + 8 * b, kTileBytes);
      hopper::load_head_tile(sk + b * kTileBytes, kHalfBytes, km, kvh, q0 - (t + 1) * kKeys, row, bar.k_full + 8 * b);
    }
    const int b = t % 2;
    sync::wait(bar.v_empty + 8 * b, (t / 2 & 1) ^ 1);
    sync::arrive_expect_bytes(bar.v_full + 8 * b, kTileBytes);
    hopper::load_head_tile(sv + b * kTileBytes, kHalfBytes, vm, kvh, q0 - t * kKeys, row, bar.v_full + 8 * b);
  }
}

// The MMA turn between the consumers: consumer w waits for its turn before issuing a tile's MMAs
// and hands the turn to the other after.
__device__ __forceinline__ void take_turn(int w) { sync::named_sync(kTurnBarrier + w, 256); }
__device__ __forceinline__ void pass_turn(int w) { sync::named_arrive(kTurnBarrier + (w ^ 1), 256); }

#endif  // LOFT_WGMMA

__global__ void __launch_bounds__(kThreads, 1)
    flash_forward_hopper_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                                const __grid_constant__ CUtensorMap v_map, HopperArgs a) {
#ifdef LOFT_WGMMA
  extern __shared__ __align__(16) uint8_t smem_raw[];
  uint8_t* const base = hopper::align_1024(smem_raw);
  // Buffer b of K at sk + b·kTileBytes, of V at sv + b·kTileBytes.
  const uint32_t sq = smem_address(base), sk = sq + kTileBytes, sv = sq + 3 * kTileBytes;
  bf16* const so = reinterpret_cast<bf16*>(base + 5 * kTileBytes);  // output staging
  int* const s_fk = reinterpret_cast<int*>(base + 5 * kTileBytes + kOutBytes);  // per row, then min, max
  const Barriers bar(smem_address(s_fk + kRows + 2));

  const int h = blockIdx.x, kvh = h / a.group;
  const int q0 = int(gridDim.z - 1 - blockIdx.z) * kRows;  // last tiles (most keys) first
  const int64_t row0 = int64_t(blockIdx.y) * a.seq;
  const int wg = threadIdx.x / 128, warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4;

  if (threadIdx.x == 0) {
    s_fk[kRows] = INT_MAX, s_fk[kRows + 1] = 0;
    sync::barrier_init(bar.q_full, 1);
    for (int b = 0; b < 2; ++b) {
      sync::barrier_init(bar.k_full + 8 * b, 1);
      sync::barrier_init(bar.v_full + 8 * b, 1);
      sync::barrier_init(bar.k_empty + 8 * b, 8);  // lane 0 of each consumer warp
      sync::barrier_init(bar.v_empty + 8 * b, 8);
    }
    sync::barriers_initialised();
  }
  __syncthreads();
  if (threadIdx.x < kRows) {
    const bool valid = q0 + int(threadIdx.x) < a.seq;
    const int fk = valid ? first_key(a.doc_start, row0, q0 + threadIdx.x) : 0;
    s_fk[threadIdx.x] = fk;
    if (valid) atomicMin(&s_fk[kRows], fk), atomicMax(&s_fk[kRows + 1], fk);
  }
  __syncthreads();  // the barriers are initialised and the first keys are in
  const int fk_max = s_fk[kRows + 1];
  const int tiles = (q0 - s_fk[kRows] / kKeys * kKeys) / kKeys + 1;  // diagonal tile down

  if (wg == 0) {
    sync::lower_registers<kProducerRegs>();
    if (threadIdx.x == 0) produce(&q_map, &k_map, &v_map, sq, sk, sv, bar, h, kvh, q0, blockIdx.y, tiles);
    return;
  }
  sync::raise_registers<kConsumerRegs>();
  const int w = wg - 1;  // consumer 0 or 1: rows 64w..64w + 63

  // This thread's two rows (block-local): accumulator rows g and g + 8 of its warp's 16.
  const int row_lo = w * 64 + warp * 16 + g;
  const int fk_row[2] = {s_fk[row_lo], s_fk[row_lo + 8]};
  const uint64_t q_desc = wgmma::descriptor(sq + w * 64 * 128, 16);
  const uint64_t k_desc = wgmma::descriptor(sk, 16);
  const uint64_t v_desc = wgmma::descriptor(sv, kHalfBytes);
  constexpr uint32_t kTileStep = kTileBytes >> 4;  // one tile buffer on, in descriptor units
  // One arrival per warp on an empty barrier, once the warp's wait has seen the MMAs done.
  const auto release = [&](uint32_t empty) {
    if (lane == 0) sync::arrive(empty);
  };

  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, alpha[2];
  float s[64], o[64] = {};
  uint32_t p[kKeys / 16][4];

  if (w == 1) pass_turn(1);  // consumer 0 issues first
  sync::wait(bar.q_full, 0);
  sync::wait(bar.k_full, 0);
  take_turn(w);
  wgmma::fence();
  issue_scores(s, q_desc, k_desc);
  wgmma::commit();
  pass_turn(w);
  wgmma::wait<0>();
  wgmma::fence_operands(s);
  release(bar.k_empty);
  online_softmax(s, m, l, alpha, a.scale_log2, q0, q0 + row_lo, fk_row, c, fk_max);
  hopper::accumulator_to_a(p, s);  // P as the A of P·V

  // Step t (FlashAttention-3's overlap inside a warpgroup): S of tile t and P·V of tile t - 1 go to
  // the tensor cores together, and tile t's softmax runs while P·V still does.
  for (int t = 1; t < tiles; ++t) {
    const int k0 = q0 - t * kKeys, kb = t % 2, vb = (t - 1) % 2;
    // Both waits before the MMAs: a wait loop between two wgmma issues makes ptxas fence them.
    sync::wait(bar.k_full + 8 * kb, t / 2 & 1);
    sync::wait(bar.v_full + 8 * vb, (t - 1) / 2 & 1);
    take_turn(w);
    wgmma::fence();
    issue_scores(s, q_desc, k_desc + kb * kTileStep);
    wgmma::commit();
    wgmma::fence_operands(o);
    issue_pv(o, p, v_desc + vb * kTileStep);
    wgmma::commit();
    pass_turn(w);
    wgmma::wait<1>();
    wgmma::fence_operands(s);
    release(bar.k_empty + 8 * kb);
    online_softmax(s, m, l, alpha, a.scale_log2, k0, q0 + row_lo, fk_row, c, fk_max);
    wgmma::wait<0>();
    wgmma::fence_operands(o);
    release(bar.v_empty + 8 * vb);
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] *= alpha[i / 2 % 2];
    hopper::accumulator_to_a(p, s);  // P as the A of P·V
  }
  // P·V of the last tile. Consumer 1 hands back no turn after it: consumer 0 takes none more, and a
  // named barrier must not be left half arrived.
  const int vb = (tiles - 1) % 2;
  sync::wait(bar.v_full + 8 * vb, (tiles - 1) / 2 & 1);
  take_turn(w);
  wgmma::fence();
  wgmma::fence_operands(o);
  issue_pv(o, p, v_desc + vb * kTileStep);
  wgmma::commit();
  if (w == 0) pass_turn(w);
  wgmma::wait<0>();
  wgmma::fence_operands(o);

  // O / l as bf16 into this consumer's 64 rows of the staging tile, then out in 16-byte chunks.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(~0u, l[r], 1);
    l[r] += __shfl_xor_sync(~0u, l[r], 2);
    const float inv = 1.0f / l[r];
    const int row = row_lo + 8 * r;
#pragma unroll
    for (int j = 0; j < 16; ++j)
      *reinterpret_cast<uint32_t*>(so + row * kOutStride + 8 * j + 2 * c) =
          pack(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
    if (c == 0 && q0 + row < a.seq) a.lse[(row0 + q0 + row) * a.hq + h] = (m[r] + log2f(l[r])) * kLn2;
  }
  sync::named_sync(kStagingBarrier + w, 128);
#pragma unroll
  for (int idx = threadIdx.x % 128; idx < 64 * 16; idx += 128) {
    const int r = w * 64 + idx / 16, col = idx % 16 * 8;
    if (q0 + r < a.seq)
      *reinterpret_cast<uint4*>(a.out + ((row0 + q0 + r) * a.hq + h) * kD + col) =
          *reinterpret_cast<const uint4*>(so + r * kOutStride + col);
  }
#else
  __trap();  // hopper_forward_supports launches this only where sm_90a code exists
#endif
}

std::atomic<bool> hopper_allowed{true};

}  // namespace

bool flash_set_hopper_forward(bool allowed) { return hopper_allowed.exchange(allowed); }

bool hopper_forward_supports(const Tensor& q, int64_t seq) {
  return hopper_allowed.load() && q.size(2) == kD && (seq + kRows - 1) / kRows <= 65535 &&
         hopper_kernel_runs_on(q.device().index, kSmemBytes);
}

void flash_forward_hopper(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
                          int64_t seq, float scale, Tensor& out, Tensor& lse) {
  const int device = cuda_kernels::use_device(q);
  const HopperArgs args{doc_start.ptr<int32_t>(), out.ptr<bf16>(), lse.ptr<float>(),
                        int(seq),        int(q.size(1)),        int(k.size(1)),
                        int(q.size(1) / k.size(1)), scale * kLog2e};
  const CUtensorMap qm = head_tile_map(q, seq, kRows), km = head_tile_map(k, seq, kKeys),
                    vm = head_tile_map(v, seq, kKeys);
  const dim3 grid(unsigned(q.size(1)), unsigned(q.size(0) / seq), unsigned((seq + kRows - 1) / kRows));
  cuda_kernels::allow_dynamic_smem(flash_forward_hopper_kernel, kSmemBytes, device);
  flash_forward_hopper_kernel<<<grid, kThreads, kSmemBytes, loft::cuda::stream(device)>>>(qm, km, vm, args);
  loft::cuda::check_launch("attention flash_forward_hopper");
}

}  // namespace loft::ops::cuda_attention
