// Flash attention backward (FlashAttention-2 schedule).
//
// One block of 4 warps per (key tile of 64, kv head, batch row); warp w owns keys 16w..16w+15 and
// accumulates their dK and dV in registers over every query head of the kv head's group and every
// query tile of 32 that can see the key tile (from the tile's first key to the end of the row,
// skipping query tiles whose documents all start after the tile). So dk/dv need no atomics, and
// the group sum comes for free. P is recomputed from the saved lse; D = rowsum(dO∘O) comes from a
// small pre-kernel (softmax_row_dot).
//
// dQ: each block adds its 32×D contribution per query tile into an fp32 buffer with atomics, then
// one conversion writes dq. The alternative (a second pass over query tiles recomputing P and dS)
// costs two extra S-sized GEMMs per tile, ≈ 40% more FLOPs; the atomics cost ≈ S/64 fp32 adds per
// dq element, which L2 absorbs, at the price of run-to-run variation in dq's low bits.
#include <climits>

#include "engine/ops/cuda/attention_flash.cuh"
#include "engine/ops/cuda/attention_paths.h"
#include "engine/ops/ops.h"

namespace loft::ops::cuda_attention {

namespace {

using namespace flash;

constexpr int kKeys = 64;     // keys per block (16 per warp)
constexpr int kQueries = 32;  // queries per step
constexpr int kThreads = 4 * kWarp;
constexpr int kDsStride = kKeys + 8;  // dS tile [query][key], padded like the others

struct BackwardArgs {
  const bf16 *q, *k, *v, *dout;
  const float *lse, *drow;
  const int32_t* doc_start;
  float* dq;  // fp32 accumulator [T, Hq, D], zeroed
  bf16 *dk, *dv;
  int seq, hq, hkv, group;
  float scale, scale_log2;
};

// Dynamic shared memory: K, V (64 rows), Q, dO (32 rows), dS, and per-query lse, D, first key.
template <int D>
constexpr size_t smem_bytes() {
  return (2 * kKeys + 2 * kQueries) * row_stride<D>() * sizeof(bf16) +
         kQueries * kDsStride * sizeof(bf16) + kQueries * (2 * sizeof(float) + sizeof(int));
}

template <int D>
__global__ void __launch_bounds__(kThreads) flash_backward_kernel(BackwardArgs a) {
  constexpr int ld = row_stride<D>();
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sk = reinterpret_cast<bf16*>(smem);
  bf16* sv = sk + kKeys * ld;
  bf16* sq = sv + kKeys * ld;
  bf16* sdo = sq + kQueries * ld;
  bf16* sds = sdo + kQueries * ld;
  float* s_lse = reinterpret_cast<float*>(sds + kQueries * kDsStride);  // log2 domain
  float* s_drow = s_lse + kQueries;
  int* s_fk = reinterpret_cast<int*>(s_drow + kQueries);  // INT_MAX for rows past seq

  const int k0 = blockIdx.x * kKeys, kvh = blockIdx.y;
  const int64_t row0 = int64_t(blockIdx.z) * a.seq;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, g = lane / 4, c = lane % 4;
  const int key[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};  // C-fragment rows g, g + 8

  load_tile<D>(sk, a.k, row0, k0, kKeys, a.seq, a.hkv, kvh);
  load_tile<D>(sv, a.v, row0, k0, kKeys, a.seq, a.hkv, kvh);

  float dk[D / 8][4] = {}, dv[D / 8][4] = {};  // the warp's 16 keys × D
  for (int h = kvh * a.group; h < (kvh + 1) * a.group; ++h) {
    // Queries before k0 never see these keys (causal).
    for (int q0 = k0; q0 < a.seq; q0 += kQueries) {
      __syncthreads();  // the previous step's readers of sq, sdo, sds, s_* are done
      bool sees = false;
      if (threadIdx.x < kQueries) {
        const int i = q0 + threadIdx.x;
        const bool valid = i < a.seq;
        const int64_t th = (row0 + i) * a.hq + h;
        const int fk = valid ? first_key(a.doc_start, row0, i) : INT_MAX;
        s_fk[threadIdx.x] = fk;
        s_lse[threadIdx.x] = valid ? a.lse[th] * kLog2e : 0.0f;
        s_drow[threadIdx.x] = valid ? a.drow[th] : 0.0f;
        sees = fk <= k0 + kKeys - 1;  // i >= k0 holds already
      }
      if (!__syncthreads_or(sees)) continue;  // every query's document starts after the tile
      load_tile<D>(sq, a.q, row0, q0, kQueries, a.seq, a.hq, h);
      load_tile<D>(sdo, a.dout, row0, q0, kQueries, a.seq, a.hq, h);
      __syncthreads();

      // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for the warp's 16 keys × 32 queries.
      float st[kQueries / 8][4] = {}, dpt[kQueries / 8][4] = {};
#pragma unroll
      for (int kd = 0; kd < D / 16; ++kd) {
        uint32_t ka[4], va[4];
        load_a(ka, sk, ld, warp * 16, kd * 16, g, c);
        load_a(va, sv, ld, warp * 16, kd * 16, g, c);
#pragma unroll
        for (int nq = 0; nq < kQueries / 8; ++nq) {
          uint32_t b0, b1;
          load_b_rows(b0, b1, sq, ld, nq * 8, kd * 16, g, c);
          mma(st[nq], ka, b0, b1);
          load_b_rows(b0, b1, sdo, ld, nq * 8, kd * 16, g, c);
          mma(dpt[nq], va, b0, b1);
        }
      }
      // Pᵀ = exp(S − lse) where visible, dSᵀ = Pᵀ ∘ (dPᵀ − D) · scale; dS also to shared memory
      // as [query][key] for the dQ product.
#pragma unroll
      for (int nq = 0; nq < kQueries / 8; ++nq)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int qi = nq * 8 + 2 * c + e % 2, i = q0 + qi, j = key[e / 2];
          const bool visible = i < a.seq && j <= i && j >= s_fk[qi];
          const float p = visible ? exp2f(st[nq][e] * a.scale_log2 - s_lse[qi]) : 0.0f;
          const float ds = p * (dpt[nq][e] - s_drow[qi]) * a.scale;
          st[nq][e] = p;
          dpt[nq][e] = ds;
          sds[qi * kDsStride + warp * 16 + g + 8 * (e / 2)] = __float2bfloat16_rn(ds);
        }
      // dV += Pᵀ·dO and dK += dSᵀ·Q (k-steps of 16 queries).
#pragma unroll
      for (int kq = 0; kq < kQueries / 16; ++kq) {
        uint32_t pa[4], dsa[4];
        c_to_a(pa, st[2 * kq], st[2 * kq + 1]);
        c_to_a(dsa, dpt[2 * kq], dpt[2 * kq + 1]);
#pragma unroll
        for (int nd = 0; nd < D / 8; ++nd) {
          uint32_t b0, b1;
          load_b_cols(b0, b1, sdo, ld, kq * 16, nd * 8, g, c);
          mma(dv[nd], pa, b0, b1);
          load_b_cols(b0, b1, sq, ld, kq * 16, nd * 8, g, c);
          mma(dk[nd], dsa, b0, b1);
        }
      }
      __syncthreads();  // sds complete

      // dQ[32 × D] += dS[32 × 64]·K[64 × D]: warp w takes query rows 16·(w % 2).. and the
      // column half w / 2, then adds it into the fp32 accumulator.
      const int mq = warp % 2 * 16, col0 = warp / 2 * (D / 2);
      float dq[D / 16][4] = {};
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        uint32_t dsa[4];
        load_a(dsa, sds, kDsStride, mq, kk * 16, g, c);
#pragma unroll
        for (int nd = 0; nd < D / 16; ++nd) {
          uint32_t b0, b1;
          load_b_cols(b0, b1, sk, ld, kk * 16, col0 + nd * 8, g, c);
          mma(dq[nd], dsa, b0, b1);
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = q0 + mq + g + 8 * r;
        if (i >= a.seq) continue;
        float* dst = a.dq + ((row0 + i) * a.hq + h) * D + col0 + 2 * c;
#pragma unroll
        for (int nd = 0; nd < D / 16; ++nd) {
          atomicAdd(dst + nd * 8, dq[nd][2 * r]);
          atomicAdd(dst + nd * 8 + 1, dq[nd][2 * r + 1]);
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (key[r] >= a.seq) continue;
    const int64_t at = ((row0 + key[r]) * a.hkv + kvh) * D + 2 * c;
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
      *reinterpret_cast<__nv_bfloat162*>(a.dk + at + nd * 8) =
          __floats2bfloat162_rn(dk[nd][2 * r], dk[nd][2 * r + 1]);
      *reinterpret_cast<__nv_bfloat162*>(a.dv + at + nd * 8) =
          __floats2bfloat162_rn(dv[nd][2 * r], dv[nd][2 * r + 1]);
    }
  }
}

template <int D>
void launch(const BackwardArgs& args, dim3 grid, int device) {
  constexpr size_t bytes = smem_bytes<D>();
  LOFT_CUDA_CHECK(cudaFuncSetAttribute(flash_backward_kernel<D>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  flash_backward_kernel<D><<<grid, kThreads, bytes, cuda::stream(device)>>>(args);
  cuda::check_launch("attention flash_backward");
}

}  // namespace

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
  const dim3 grid(unsigned((seq + kKeys - 1) / kKeys), unsigned(k.size(1)),
                  unsigned(q.size(0) / seq));
  if (q.size(2) == 64)
    launch<64>(args, grid, device);
  else
    launch<128>(args, grid, device);
  ops::convert(dq32, dq);
}

}  // namespace loft::ops::cuda_attention
