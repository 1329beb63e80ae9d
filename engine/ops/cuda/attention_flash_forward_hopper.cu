// Flash attention forward on Hopper's warpgroup MMA (wgmma, sm_90a), head dim 128: what
// flash_forward runs on an H100/H200 when the build has sm_90a code (hopper_forward_supports); the
// mma.sync kernel (attention_flash_forward.cu) stays the path of every other GPU.
//
// Why: mma.sync on Hopper issues from registers filled by ldmatrix, and at head dim 128 that
// kernel reached 263 TFLOP/s where FlashAttention-2 reaches 325 on an H200; wgmma reads both
// operands of Q·Kᵀ and V of P·V straight from shared memory, 64×128×16 per instruction. This one
// reaches 422 at 4 × 4096 (docs/perf-journal.md, session 17).
//
// One block of two warpgroups per (query tile of 128 rows, query head, batch row); warpgroup w owns
// rows 64w..64w+63. Key tiles of 128 run from the diagonal down to the tile's earliest document
// start, as in the mma.sync kernel. Q, and K and V of two tiles (double-buffered), sit in shared
// memory in the 128-byte swizzled layout wgmma reads (wgmma.cuh), filled by cp.async a step
// ahead. Per tile: S = Q·Kᵀ (8 SS MMAs over head dim 128), the online softmax in registers (fp32,
// log2 domain, as the mma.sync kernel), O += P·V with P rounded to bf16 straight from the S
// accumulators (8 RS MMAs over the tile's keys); P·V of one tile is issued with S of the next and
// runs while that tile's softmax does. Not yet: warp specialisation and the two warpgroups' ping-
// pong (they meet at a barrier every tile), which FlashAttention-3 adds.
#include <atomic>
#include <climits>

#include "engine/ops/cuda/attention_hopper.cuh"
#include "engine/ops/cuda/attention_paths.h"

namespace loft::ops::cuda_attention {

namespace {

using namespace flash;
using hopper::copies_landed;
using hopper::load_tile;

constexpr int kD = 128;
constexpr int kRows = 128;                 // query rows per block, 64 per warpgroup
constexpr int kKeys = 128;                 // keys per tile
constexpr int kThreads = 256;              // two warpgroups
constexpr int kHalfBytes = kRows * 128;    // one 64-column half of a 128-row tile: 16 KiB
constexpr int kTileBytes = 2 * kHalfBytes; // a 128-row tile of head dim 128: 32 KiB
constexpr int kOutStride = kD + 8;         // bf16 per row of the output staging (bank shift)
// Q, K ×2, V ×2, the rows' first keys and their min/max, and slack to align the tiles to 1024.
constexpr size_t kSmemBytes = 5 * kTileBytes + (kRows + 2) * sizeof(int) + 1024;
static_assert(kRows * kOutStride * 2 <= 2 * kTileBytes, "output staging fits in the two K tiles");
static_assert(kKeys == kRows, "a query tile's diagonal is one key tile, which starts at its first row");

struct HopperArgs {
  const bf16 *q, *k, *v;
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

#endif  // LOFT_WGMMA

__global__ void __launch_bounds__(kThreads, 1) flash_forward_hopper_kernel(HopperArgs a) {
#ifdef LOFT_WGMMA
  extern __shared__ __align__(16) uint8_t smem_raw[];
  uint8_t* const base = hopper::align_1024(smem_raw);
  uint8_t* const sq = base;
  // Buffer b of K at sk + b·kTileBytes, of V at sv + b·kTileBytes.
  uint8_t* const sk = base + kTileBytes;
  uint8_t* const sv = base + 3 * kTileBytes;
  int* const s_fk = reinterpret_cast<int*>(base + 5 * kTileBytes);  // per row, then min, max

  const int h = blockIdx.x, kvh = h / a.group;
  const int q0 = int(gridDim.z - 1 - blockIdx.z) * kRows;  // last tiles (most keys) first
  const int64_t row0 = int64_t(blockIdx.y) * a.seq;
  const int wg = threadIdx.x / 128, warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4;

  if (threadIdx.x == 0) s_fk[kRows] = INT_MAX, s_fk[kRows + 1] = 0;
  load_tile<kRows, kThreads>(smem_address(sq), a.q, row0, q0, a.seq, a.hq, h);
  load_tile<kRows, kThreads>(smem_address(sk), a.k, row0, q0, a.seq, a.hkv, kvh);
  cp_async_commit();  // group 0: Q and K of tile 0 (the diagonal one)
  __syncthreads();
  if (threadIdx.x < kRows) {
    const bool valid = q0 + int(threadIdx.x) < a.seq;
    const int fk = valid ? first_key(a.doc_start, row0, q0 + threadIdx.x) : 0;
    s_fk[threadIdx.x] = fk;
    if (valid) atomicMin(&s_fk[kRows], fk), atomicMax(&s_fk[kRows + 1], fk);
  }
  __syncthreads();
  const int fk_max = s_fk[kRows + 1];
  const int tiles = (q0 - s_fk[kRows] / kKeys * kKeys) / kKeys + 1;  // diagonal tile down
  // Group 1: V of tile 0 and K of tile 1 (each step's group brings the next ones).
  load_tile<kRows, kThreads>(smem_address(sv), a.v, row0, q0, a.seq, a.hkv, kvh);
  if (tiles > 1) load_tile<kRows, kThreads>(smem_address(sk) + kTileBytes, a.k, row0, q0 - kKeys, a.seq, a.hkv, kvh);
  cp_async_commit();

  // This thread's two rows (block-local): accumulator rows g and g + 8 of its warp's 16.
  const int row_lo = wg * 64 + warp * 16 + g;
  const int fk_row[2] = {s_fk[row_lo], s_fk[row_lo + 8]};
  const uint64_t q_desc = wgmma::descriptor(smem_address(sq) + wg * 64 * 128, 16);
  const uint64_t k_desc = wgmma::descriptor(smem_address(sk), 16);
  const uint64_t v_desc = wgmma::descriptor(smem_address(sv), kHalfBytes);
  constexpr uint32_t kTileStep = kTileBytes >> 4;  // one tile buffer on, in descriptor units

  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, alpha[2];
  float s[64], o[64] = {};
  uint32_t p[kKeys / 16][4];

  copies_landed<1>();  // Q and K of tile 0
  wgmma::fence();
  issue_scores(s, q_desc, k_desc);
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_operands(s);
  online_softmax(s, m, l, alpha, a.scale_log2, q0, q0 + row_lo, fk_row, c, fk_max);
  hopper::accumulator_to_a(p, s);  // P as the A of P·V

  // Step t (FlashAttention-3's overlap inside a warpgroup): S of tile t and P·V of tile t - 1 go to
  // the tensor cores together, and tile t's softmax runs while P·V still does. Loads a step
  // ahead: step t brings K of tile t + 1 (into the buffer tile t - 1's K left) and V of tile t
  // (into the one tile t - 2's V left).
  for (int t = 1; t < tiles; ++t) {
    const int k0 = q0 - t * kKeys;
    copies_landed<0>();  // K of tile t and V of t - 1 are in; every read of the buffers refilled next is done
    if (t + 1 < tiles) load_tile<kRows, kThreads>(smem_address(sk) + (t + 1) % 2 * kTileBytes, a.k, row0, k0 - kKeys, a.seq, a.hkv, kvh);
    load_tile<kRows, kThreads>(smem_address(sv) + t % 2 * kTileBytes, a.v, row0, k0, a.seq, a.hkv, kvh);
    cp_async_commit();

    wgmma::fence();
    issue_scores(s, q_desc, k_desc + t % 2 * kTileStep);
    wgmma::commit();
    wgmma::fence_operands(o);
    issue_pv(o, p, v_desc + (t - 1) % 2 * kTileStep);
    wgmma::commit();
    wgmma::wait<1>();
    wgmma::fence_operands(s);
    online_softmax(s, m, l, alpha, a.scale_log2, k0, q0 + row_lo, fk_row, c, fk_max);
    wgmma::wait<0>();
    wgmma::fence_operands(o);
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] *= alpha[i / 2 % 2];
    hopper::accumulator_to_a(p, s);  // P as the A of P·V
  }
  // P·V of the last tile.
  copies_landed<0>();  // V of the last tile is in; no read of the K buffers is left
  wgmma::fence();
  wgmma::fence_operands(o);
  issue_pv(o, p, v_desc + (tiles - 1) % 2 * kTileStep);
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_operands(o);

  // O / l as bf16 into a staging tile over the two K buffers (no copy is in flight into them, and
  // the last barrier ended every read of them), then out in 16-byte chunks.
  bf16* so = reinterpret_cast<bf16*>(sk);
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
  __syncthreads();
#pragma unroll
  for (int idx = threadIdx.x; idx < kRows * 16; idx += kThreads) {
    const int r = idx / 16, col = idx % 16 * 8;
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
  const HopperArgs args{q.ptr<bf16>(),   k.ptr<bf16>(),         v.ptr<bf16>(),
                        doc_start.ptr<int32_t>(), out.ptr<bf16>(), lse.ptr<float>(),
                        int(seq),        int(q.size(1)),        int(k.size(1)),
                        int(q.size(1) / k.size(1)), scale * kLog2e};
  const dim3 grid(unsigned(q.size(1)), unsigned(q.size(0) / seq), unsigned((seq + kRows - 1) / kRows));
  cuda_kernels::allow_dynamic_smem(flash_forward_hopper_kernel, kSmemBytes, device);
  flash_forward_hopper_kernel<<<grid, kThreads, kSmemBytes, loft::cuda::stream(device)>>>(args);
  loft::cuda::check_launch("attention flash_forward_hopper");
}

}  // namespace loft::ops::cuda_attention
