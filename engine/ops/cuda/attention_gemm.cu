// CUDA attention, the general path (any head dim, F32 or BF16): batched cuBLAS GEMMs, one batch entry per (row b, query head h), reading q/k/v
// in place through leading dimension H·D, around masked-softmax kernels. cuBLAS is column-major,
// so a row-major [rows, D] head slice with row stride H·D is the column-major D×rows matrix with
// ld H·D, and a row-major score block [queries, keys] with ld keys is its column-major transpose.
//
// Work is split into blocks of query rows [i0, i1) (keys [0, i1): causal, later keys are masked)
// and chunks of batch entries, so that the score scratch stays within the budget.
#include <cuda_bf16.h>

#include <algorithm>

#include "engine/device/cuda_context.h"
#include "engine/ops/cuda/attention_paths.h"
#include "engine/ops/cuda/kernel_util.cuh"

namespace loft::ops::cuda_attention {

namespace {

using loft::cuda::cublas_api;

// bf16, to_f32, from_f32: the conversions every CUDA op shares.
using namespace cuda_kernels;

size_t g_scratch_budget = size_t(256) << 20;
constexpr int64_t kMaxBatch = 65535;  // batch entries per cuBLAS call
constexpr int kRowThreads = 128;      // threads per score row in the softmax kernels

struct Geometry {
  int64_t seq, hq, hkv, d, group;  // group = hq / hkv query heads per kv head
};

// Batch entry e of a chunk is pair first + e of the enumeration (b, hh), hh < heads; its query
// head is hh·head_mul + head_add. Forward enumerates query heads (heads = hq, mul 1, add 0); the
// backward enumerates kv heads and one member r of each group per pass (heads = hkv, mul =
// group, add = r), so no two entries of one call accumulate into the same dk/dv.
struct EntryMap {
  int64_t first;
  int64_t heads, head_mul, head_add;
  __device__ void decode(int64_t e, int64_t& b, int64_t& h) const {
    const int64_t idx = first + e;
    b = idx / heads;
    h = idx % heads * head_mul + head_add;
  }
};

// The matrices a chunk's GEMMs read and write; one device pointer array per slot.
enum Slot : int { kQ, kK, kV, kO, kDO, kDQ, kDK, kDV, kScores, kDP, kP, kDS, kSlots };
enum class Side : int { kNone, kQuery, kKv, kScratch };
struct Operand {
  Side side = Side::kNone;
  const char* base = nullptr;
  int64_t elem_bytes = 0;
  int64_t entry_bytes = 0;  // scratch only: bytes per batch entry
};
struct PointerPlan {
  Operand op[kSlots];
  Geometry g;
  EntryMap map;
  int64_t i0, entries;
};

__global__ void fill_pointers(PointerPlan plan, const void** out) {
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (e >= plan.entries) return;
  int64_t b, h;
  plan.map.decode(e, b, h);
  const Geometry& g = plan.g;
  for (int s = 0; s < kSlots; ++s) {
    const Operand& o = plan.op[s];
    int64_t offset = 0;
    switch (o.side) {
      case Side::kNone:
        continue;
      case Side::kQuery:
        offset = ((b * g.seq + plan.i0) * g.hq + h) * g.d * o.elem_bytes;
        break;
      case Side::kKv:
        offset = (b * g.seq * g.hkv + h / g.group) * g.d * o.elem_bytes;
        break;
      case Side::kScratch:
        offset = e * o.entry_bytes;
        break;
    }
    out[s * plan.entries + e] = o.base + offset;
  }
}

// Scores row of entry e, query row i0 + ii; one block per row. Also the row's token and head.
struct RowCtx {
  int64_t e, i, t, h, first_key;
};
__device__ RowCtx row_ctx(const Geometry& g, const EntryMap& map, int64_t i0, int64_t rows,
                          const int32_t* doc_start) {
  RowCtx c;
  c.e = blockIdx.x / rows;
  c.i = i0 + blockIdx.x % rows;
  int64_t b;
  map.decode(c.e, b, c.h);
  c.t = b * g.seq + c.i;
  // Clamped so that a bad doc_start can never address outside the row (see attention_cuda.h).
  c.first_key = min(max(int64_t(doc_start[c.t]), int64_t(0)), c.i);
  return c;
}

// Merges two (max, sum of exp(x − max)) pairs.
__device__ __forceinline__ void merge(float& m, float& l, float m2, float l2) {
  const float mn = fmaxf(m, m2);
  if (mn == -INFINITY) return;
  l = l * expf(m - mn) + l2 * expf(m2 - mn);
  m = mn;
}

// Block-wide merge of every thread's (m, l); all threads get the result.
__device__ void block_merge(float& m, float& l) {
  __shared__ float sm[kRowThreads / 32], sl[kRowThreads / 32];
  for (int o = 16; o > 0; o /= 2)
    merge(m, l, __shfl_xor_sync(~0u, m, o), __shfl_xor_sync(~0u, l, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sm[warp] = m, sl[warp] = l;
  __syncthreads();
  m = sm[0];
  l = sl[0];
  for (int w = 1; w < kRowThreads / 32; ++w) merge(m, l, sm[w], sl[w]);
}

// probs = softmax of the visible keys (0 elsewhere), lse per (token, head).
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    masked_softmax(const float* scores, T* probs, float* lse, const int32_t* doc_start, Geometry g,
                   EntryMap map, int64_t i0, int64_t rows, int64_t nk) {
  const RowCtx c = row_ctx(g, map, i0, rows, doc_start);
  const float* s = scores + blockIdx.x * nk;
  float m = -INFINITY, l = 0;
  for (int64_t j = c.first_key + threadIdx.x; j <= c.i; j += kRowThreads) merge(m, l, s[j], 1.0f);
  block_merge(m, l);
  const float row_lse = m + logf(l);
  if (threadIdx.x == 0) lse[c.t * g.hq + c.h] = row_lse;
  T* p = probs + blockIdx.x * nk;
  for (int64_t j = threadIdx.x; j < nk; j += kRowThreads)
    p[j] = from_f32<T>(j >= c.first_key && j <= c.i ? expf(s[j] - row_lse) : 0.0f);
}

// From recomputed scores and dP = dO·Vᵀ: P = exp(S − lse) and dS = P ⊙ (dP − D)·scale.
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    softmax_grad(const float* scores, const float* dp, T* probs, T* dscores, const float* lse,
                 const float* drow, const int32_t* doc_start, Geometry g, EntryMap map, int64_t i0,
                 int64_t rows, int64_t nk, float scale) {
  const RowCtx c = row_ctx(g, map, i0, rows, doc_start);
  const float row_lse = lse[c.t * g.hq + c.h], d = drow[c.t * g.hq + c.h];
  const int64_t at = blockIdx.x * nk;
  for (int64_t j = threadIdx.x; j < nk; j += kRowThreads) {
    const bool visible = j >= c.first_key && j <= c.i;
    const float p = visible ? expf(scores[at + j] - row_lse) : 0.0f;
    probs[at + j] = from_f32<T>(p);
    dscores[at + j] = from_f32<T>(visible ? p * (dp[at + j] - d) * scale : 0.0f);
  }
}

template <typename T>
__global__ void from_fp32(const float* src, T* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = from_f32<T>(src[i]);
}

cudaDataType cuda_type(DType t) { return t == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }

// One cublasGemmBatchedEx with fp32 compute (never TF32) and host alpha/beta.
struct BatchedGemm {
  cublasHandle_t handle;
  int64_t batch;
  void run(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void** a, DType at,
           int64_t lda, const void** b, DType bt, int64_t ldb, float beta, void** c, DType ct,
           int64_t ldc) const {
    LOFT_CUBLAS_CHECK(cublas_api().cublasGemmBatchedEx(
        handle, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, int(m), int(n),
        int(k), &alpha, a, cuda_type(at), int(lda), b, cuda_type(bt), int(ldb), &beta, c,
        cuda_type(ct), int(ldc), int(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
};

// How the work is cut: query rows per block and batch entries per chunk, so that
// rows · keys · entries · bytes_per_score stays within the budget.
struct Split {
  int64_t rows, entries;
};
Split split_work(int64_t seq, int64_t entries, size_t bytes_per_score) {
  const int64_t fit = std::max<int64_t>(1, int64_t(g_scratch_budget / bytes_per_score));
  if (seq * seq <= fit)
    return {seq, std::clamp<int64_t>(fit / (seq * seq), 1, std::min(entries, kMaxBatch))};
  return {std::max<int64_t>(1, fit / seq), 1};
}

// Everything one call shares: device, stream, shapes, dtype, inputs, the chunk pointer arrays,
// and the scratch for fp32 scores and probabilities (in the call's dtype).
struct Call {
  int device;
  cudaStream_t stream;
  cublasHandle_t blas;
  Geometry g;
  DType dtype;
  int64_t elem;  // bytes per q/k/v element
  Split split;
  const Tensor &q, &k, &v;
  Tensor pointers, scores, probs;

  // scratch_bytes: bytes per score element of all the call's score-shaped scratch together.
  Call(const Tensor& q_, const Tensor& k_, const Tensor& v_, int64_t seq, int64_t entries,
       size_t scratch_bytes)
      : device(q_.device().index),
        g{seq, q_.size(1), k_.size(1), q_.size(2), q_.size(1) / k_.size(1)},
        dtype(q_.dtype()),
        elem(int64_t(dtype_size(q_.dtype()))),
        q(q_),
        k(k_),
        v(v_) {
    loft::cuda::set_device(device);
    stream = loft::cuda::stream(device);
    blas = loft::cuda::cublas_handle(device);
    split = split_work(seq, entries, scratch_bytes);
    pointers = Tensor::empty({kSlots * split.entries}, DType::I64, q.device());
    scores = scratch_tensor(DType::F32);
    probs = scratch_tensor(dtype);
  }
  Tensor scratch_tensor(DType t) const {
    return Tensor::empty({split.entries * split.rows * g.seq}, t, q.device());
  }
  // A chunk's plan with q, k, v, scores and probabilities set; callers add the rest.
  PointerPlan plan(EntryMap map, int64_t i0, int64_t n, int64_t rows, int64_t nk) const {
    PointerPlan p{};
    p.map = map;
    p.i0 = i0;
    p.entries = n;
    p.op[kQ] = tensor(Side::kQuery, q);
    p.op[kK] = tensor(Side::kKv, k);
    p.op[kV] = tensor(Side::kKv, v);
    p.op[kScores] = scratch(scores, rows * nk * int64_t(sizeof(float)));
    p.op[kP] = scratch(probs, rows * nk * elem);
    return p;
  }
  Operand tensor(Side side, const Tensor& t) const {
    return {side, static_cast<const char*>(t.data()), int64_t(dtype_size(t.dtype())), 0};
  }
  Operand scratch(const Tensor& t, int64_t entry_bytes) const {
    return {Side::kScratch, static_cast<const char*>(t.data()), 0, entry_bytes};
  }
  // Queues the kernel that writes the chunk's pointer arrays (read back through slot()).
  void fill(PointerPlan& plan) const {
    plan.g = g;
    fill_pointers<<<unsigned((plan.entries + 127) / 128), 128, 0, stream>>>(
        plan, static_cast<const void**>(pointers.data()));
    loft::cuda::check_launch("attention fill_pointers");
  }
  const void** slot(int s, int64_t n) const {
    return static_cast<const void**>(pointers.data()) + s * n;
  }
  void** out_slot(int s, int64_t n) const { return static_cast<void**>(pointers.data()) + s * n; }
};

template <typename F>
void with_dtype(DType t, F&& f) {
  if (t == DType::BF16)
    f(bf16{});
  else
    f(float{});
}

}  // namespace

size_t gemm_set_scratch_budget(size_t bytes) {
  const size_t old = g_scratch_budget;
  g_scratch_budget = std::max<size_t>(bytes, 1);
  return old;
}

void gemm_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
                  int64_t seq, float scale, Tensor& out, Tensor& lse) {
  if (q.numel() == 0) return;
  const int64_t batch_rows = q.size(0) / seq;
  const int64_t entries = batch_rows * q.size(1);
  Call call(q, k, v, seq, entries, sizeof(float) + dtype_size(q.dtype()));
  const Geometry& g = call.g;
  const Split sp = call.split;
  const int64_t ldq = g.hq * g.d, ldk = g.hkv * g.d;

  for (int64_t i0 = 0; i0 < seq; i0 += sp.rows) {
    const int64_t rows = std::min(sp.rows, seq - i0), nk = i0 + rows;
    for (int64_t first = 0; first < entries; first += sp.entries) {
      const int64_t n = std::min(sp.entries, entries - first);
      PointerPlan plan = call.plan({first, g.hq, 1, 0}, i0, n, rows, nk);
      plan.op[kO] = call.tensor(Side::kQuery, out);
      call.fill(plan);
      const BatchedGemm gemm{call.blas, n};
      const DType dt = call.dtype;
      // Scoresᵀ [nk × rows] = K · Qᵀ, scaled.
      gemm.run(true, false, nk, rows, g.d, scale, call.slot(kK, n), dt, ldk, call.slot(kQ, n), dt,
               ldq, 0.0f, call.out_slot(kScores, n), DType::F32, nk);
      with_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        masked_softmax<T><<<unsigned(n * rows), kRowThreads, 0, call.stream>>>(
            call.scores.ptr<float>(), call.probs.ptr<T>(), lse.ptr<float>(),
            doc_start.ptr<int32_t>(), g, plan.map, i0, rows, nk);
      });
      loft::cuda::check_launch("attention masked_softmax");
      // Oᵀ [D × rows] = Vᵀ · Pᵀ.
      gemm.run(false, false, g.d, rows, nk, 1.0f, call.slot(kV, n), dt, ldk, call.slot(kP, n), dt,
               nk, 0.0f, call.out_slot(kO, n), dt, ldq);
    }
  }
}

void gemm_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& out, const Tensor& lse, const Tensor& doc_start, int64_t seq,
                   float scale, Tensor& dq, Tensor& dk, Tensor& dv) {
  if (q.numel() == 0) return;
  const int64_t batch_rows = q.size(0) / seq;
  const int64_t entries = batch_rows * k.size(1);  // (row, kv head) pairs
  Call call(q, k, v, seq, entries, 2 * (sizeof(float) + dtype_size(q.dtype())));
  const Geometry& g = call.g;
  const Split sp = call.split;
  const DType dt = call.dtype;
  const Device dev = q.device();

  // D = rowsum(dout ⊙ out) per (token, head): the softmax Jacobian's diagonal term.
  Tensor drow = Tensor::empty({q.size(0), g.hq}, DType::F32, dev);
  softmax_row_dot(dout, out, drow);
  // dk and dv sum over the query heads of a group and over query blocks: fp32 accumulators.
  Tensor dk32 = dt == DType::F32 ? dk : Tensor::empty(dk.shape(), DType::F32, dev);
  Tensor dv32 = dt == DType::F32 ? dv : Tensor::empty(dv.shape(), DType::F32, dev);
  dk32.zero_();
  dv32.zero_();

  const Tensor dp = call.scratch_tensor(DType::F32), dscores = call.scratch_tensor(dt);
  const int64_t ldq = g.hq * g.d, ldk = g.hkv * g.d;

  for (int64_t i0 = 0; i0 < seq; i0 += sp.rows) {
    const int64_t rows = std::min(sp.rows, seq - i0), nk = i0 + rows;
    for (int64_t first = 0; first < entries; first += sp.entries) {
      const int64_t n = std::min(sp.entries, entries - first);
      const BatchedGemm gemm{call.blas, n};
      for (int64_t r = 0; r < g.group; ++r) {
        PointerPlan plan = call.plan({first, g.hkv, g.group, r}, i0, n, rows, nk);
        plan.op[kDO] = call.tensor(Side::kQuery, dout);
        plan.op[kDQ] = call.tensor(Side::kQuery, dq);
        plan.op[kDK] = call.tensor(Side::kKv, dk32);
        plan.op[kDV] = call.tensor(Side::kKv, dv32);
        plan.op[kDP] = call.scratch(dp, rows * nk * int64_t(sizeof(float)));
        plan.op[kDS] = call.scratch(dscores, rows * nk * call.elem);
        call.fill(plan);
        // Scoresᵀ = K · Qᵀ (scaled) and dPᵀ = V · dOᵀ, [nk × rows] each.
        gemm.run(true, false, nk, rows, g.d, scale, call.slot(kK, n), dt, ldk, call.slot(kQ, n), dt,
                 ldq, 0.0f, call.out_slot(kScores, n), DType::F32, nk);
        gemm.run(true, false, nk, rows, g.d, 1.0f, call.slot(kV, n), dt, ldk, call.slot(kDO, n), dt,
                 ldq, 0.0f, call.out_slot(kDP, n), DType::F32, nk);
        with_dtype(dt, [&](auto tag) {
          using T = decltype(tag);
          softmax_grad<T><<<unsigned(n * rows), kRowThreads, 0, call.stream>>>(
              call.scores.ptr<float>(), dp.ptr<float>(), call.probs.ptr<T>(), dscores.ptr<T>(),
              lse.ptr<float>(), drow.ptr<float>(), doc_start.ptr<int32_t>(), g, plan.map, i0, rows,
              nk, scale);
        });
        loft::cuda::check_launch("attention softmax_grad");
        // dVᵀ [D × nk] += dOᵀ · P ; dQᵀ [D × rows] = Kᵀ · dSᵀ ; dKᵀ [D × nk] += Qᵀ · dS.
        gemm.run(false, true, g.d, nk, rows, 1.0f, call.slot(kDO, n), dt, ldq, call.slot(kP, n), dt,
                 nk, 1.0f, call.out_slot(kDV, n), DType::F32, ldk);
        gemm.run(false, false, g.d, rows, nk, 1.0f, call.slot(kK, n), dt, ldk, call.slot(kDS, n),
                 dt, nk, 0.0f, call.out_slot(kDQ, n), dt, ldq);
        gemm.run(false, true, g.d, nk, rows, 1.0f, call.slot(kQ, n), dt, ldq, call.slot(kDS, n), dt,
                 nk, 1.0f, call.out_slot(kDK, n), DType::F32, ldk);
      }
    }
  }
  if (dt != DType::F32) {
    with_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      for (auto [src, dst] : {std::pair{&dk32, &dk}, std::pair{&dv32, &dv}}) {
        const int64_t n = src->numel();
        from_fp32<T><<<unsigned(std::min<int64_t>((n + 255) / 256, 4096)), 256, 0, call.stream>>>(
            src->ptr<float>(), dst->ptr<T>(), n);
        loft::cuda::check_launch("attention from_fp32");
      }
    });
  }
}

}  // namespace loft::ops::cuda_attention
