// The optimizer's step over all of a model's trainable tensors in a few launches, as apex's
// multi_tensor_apply does it: a device table of chunks (pointers into each tensor, at most kChunk
// elements each) that one block each walks. At llama-7b r=64 that is 448 tensors (~160M fp32
// params): one launch per op instead of one per tensor, and no host round trip per tensor.
//
//   grad_norm_clip: chunk_sum_squares (one double per chunk) → finish_norm (one block sums the
//                   partials in a fixed order, takes √, writes the norm and the clip factor on the
//                   device) → Σ and the norm to the host (the step's one wait).
//   adamw_all:      chunk_adamw reads each grad, scales it by the device-side factor, updates
//                   p, m, v as ops::adamw does (adamw_element.cuh), writes the grad back as 0 and,
//                   where the param has a BF16/F16 copy (AdamWTensors::copies), p rounded into it
//                   (one launch instead of a convert per tensor after the step).
//
// Every partial has a fixed place and the reductions a fixed order, so the norm has the same bits
// on every run (the CPU reference sums in another order: equal to about 1e-15 relative).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "engine/device/cuda_context.h"
#include "engine/ops/cuda/adamw_element.cuh"
#include "engine/ops/ops.h"

namespace loft::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = int64_t(1) << 16;  // elements per block: 256 KiB of each operand

enum class CopyKind : int32_t { None, BF16, F16 };

// One block's work: n elements from each pointer on (p, m, v null for a norm-only list; copy null
// where the param has none).
struct Chunk {
  float* p;
  float* g;
  float* m;
  float* v;
  void* copy;
  int64_t n;
  CopyKind copy_kind;
};

// The device table for one list of tensors, kept between steps (AdamWTensors::plan). `key` is
// every tensor's address and size: a list whose storage moved gets a new table.
struct Plan {
  std::vector<std::pair<const void*, int64_t>> key;
  int device = -1;
  int64_t chunks = 0;
  Tensor table;     // U8: Chunk[chunks]
  Tensor partials;  // I64 [max(chunks, 1)]: one double per chunk (the bits)
  Tensor result;    // I64 [2]: Σ g² and its square root (the bits of two doubles)
};

bool has_state(const AdamWTensors& t) { return !t.params.empty(); }

std::vector<std::pair<const void*, int64_t>> key_of(const AdamWTensors& t) {
  std::vector<std::pair<const void*, int64_t>> key;
  for (const auto* list : {&t.grads, &t.params, &t.m, &t.v, &t.copies})
    for (const Tensor& x : *list) key.emplace_back(x.defined() ? x.data() : nullptr, x.defined() ? x.numel() : 0);
  return key;
}

Plan& plan_for(AdamWTensors& t, Device device) {
  auto key = key_of(t);
  if (auto* p = static_cast<Plan*>(t.plan.get()); p && p->key == key && p->device == device.index)
    return *p;
  auto plan = std::make_shared<Plan>();
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < t.grads.size(); ++i) {
    auto at = [&](const std::vector<Tensor>& list, int64_t off) {
      return has_state(t) ? list[i].ptr<float>() + off : nullptr;
    };
    const int64_t n = t.grads[i].numel();
    const Tensor* copy = i < t.copies.size() && t.copies[i].defined() ? &t.copies[i] : nullptr;
    const CopyKind kind = !copy ? CopyKind::None : copy->dtype() == DType::BF16 ? CopyKind::BF16 : CopyKind::F16;
    for (int64_t off = 0; off < n; off += kChunk)
      chunks.push_back({at(t.params, off), t.grads[i].ptr<float>() + off, at(t.m, off), at(t.v, off),
                        copy ? static_cast<char*>(copy->data()) + off * 2 : nullptr,
                        std::min(kChunk, n - off), kind});
  }
  plan->key = std::move(key);
  plan->device = device.index;
  plan->chunks = int64_t(chunks.size());
  if (!chunks.empty())
    plan->table = Tensor::from_host(chunks.data(), {int64_t(chunks.size() * sizeof(Chunk))},
                                    DType::U8, device);
  plan->partials = Tensor::empty({std::max<int64_t>(plan->chunks, 1)}, DType::I64, device);
  plan->result = Tensor::empty({2}, DType::I64, device);
  t.plan = plan;
  return *plan;
}

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// Σ over the block in a fixed order (shuffle tree per warp, then the warps in turn); the result is
// thread 0's.
__device__ double block_sum(double s) {
  __shared__ double warp_sums[kThreads / 32];
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(~0u, s, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  double b = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kThreads / 32; ++w) b += warp_sums[w];
  return b;
}

__device__ __forceinline__ double sq(float x) { return double(x) * double(x); }

__global__ void __launch_bounds__(kThreads) chunk_sum_squares(const Chunk* chunks, double* partials) {
  const Chunk c = chunks[blockIdx.x];
  double s = 0;
  int64_t done = 0;
  if (aligned16(c.g)) {
    const float4* g4 = reinterpret_cast<const float4*>(c.g);
    done = c.n / 4 * 4;
    for (int64_t i = threadIdx.x; i < c.n / 4; i += kThreads) {
      const float4 x = g4[i];
      s += sq(x.x) + sq(x.y) + sq(x.z) + sq(x.w);
    }
  }
  for (int64_t i = done + threadIdx.x; i < c.n; i += kThreads) s += sq(c.g[i]);
  const double b = block_sum(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = b;
}

// One block: the partials in a fixed order, then Σ, the norm and (grad_scale non-null) the factor.
__global__ void __launch_bounds__(kThreads) finish_norm(const double* partials, int64_t count,
                                                        double max_norm, double* result,
                                                        float* grad_scale) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) s += partials[i];
  const double total = block_sum(s);
  if (threadIdx.x == 0) {
    const double norm = sqrt(total);  // correctly rounded, as the host's std::sqrt
    result[0] = total;
    result[1] = norm;
    if (grad_scale) *grad_scale = clip_factor(norm, max_norm);
  }
}

__device__ __forceinline__ void update(float& p, float& g, float& m, float& v, bool scaled,
                                       float factor, const AdamWConsts& c) {
  // The clipped grad rounds as ops::scale rounds it (g · factor in fp32), then it is consumed.
  adamw_element(p, m, v, scaled ? __fmul_rn(g, factor) : g, c);
  g = 0.0f;
}

// The updated p rounded to the copy's dtype (round to nearest even, as convert), at element i.
__device__ __forceinline__ void store_copy(const Chunk& k, int64_t i, float p) {
  if (k.copy_kind == CopyKind::BF16)
    static_cast<__nv_bfloat16*>(k.copy)[i] = __float2bfloat16_rn(p);
  else if (k.copy_kind == CopyKind::F16)
    static_cast<__half*>(k.copy)[i] = __float2half_rn(p);
}

// Four updated params as one 8-byte store: element 4·i4 on, in a copy that chunk_adamw found
// 8-byte aligned (else it takes the per-element path).
__device__ __forceinline__ void store_copy4(const Chunk& k, int64_t i4, float4 p) {
  if (k.copy_kind == CopyKind::BF16) {
    __nv_bfloat162 lo = __floats2bfloat162_rn(p.x, p.y), hi = __floats2bfloat162_rn(p.z, p.w);
    uint2 u;
    u.x = *reinterpret_cast<uint32_t*>(&lo);
    u.y = *reinterpret_cast<uint32_t*>(&hi);
    reinterpret_cast<uint2*>(k.copy)[i4] = u;
  } else if (k.copy_kind == CopyKind::F16) {
    __half2 lo = __floats2half2_rn(p.x, p.y), hi = __floats2half2_rn(p.z, p.w);
    uint2 u;
    u.x = *reinterpret_cast<uint32_t*>(&lo);
    u.y = *reinterpret_cast<uint32_t*>(&hi);
    reinterpret_cast<uint2*>(k.copy)[i4] = u;
  }
}

__global__ void __launch_bounds__(kThreads) chunk_adamw(const Chunk* chunks, const float* grad_scale,
                                                        AdamWConsts c) {
  const Chunk k = chunks[blockIdx.x];
  const bool scaled = grad_scale != nullptr;
  const float factor = scaled ? *grad_scale : 1.0f;  // read once: the stores below cannot alias it
  int64_t done = 0;
  const bool copy_vec = k.copy_kind == CopyKind::None || (reinterpret_cast<uintptr_t>(k.copy) & 7) == 0;
  if (aligned16(k.p) && aligned16(k.g) && aligned16(k.m) && aligned16(k.v) && copy_vec) {
    float4* p4 = reinterpret_cast<float4*>(k.p);
    float4* g4 = reinterpret_cast<float4*>(k.g);
    float4* m4 = reinterpret_cast<float4*>(k.m);
    float4* v4 = reinterpret_cast<float4*>(k.v);
    done = k.n / 4 * 4;
    for (int64_t i = threadIdx.x; i < k.n / 4; i += kThreads) {
      float4 p = p4[i], g = g4[i], m = m4[i], v = v4[i];
      update(p.x, g.x, m.x, v.x, scaled, factor, c);
      update(p.y, g.y, m.y, v.y, scaled, factor, c);
      update(p.z, g.z, m.z, v.z, scaled, factor, c);
      update(p.w, g.w, m.w, v.w, scaled, factor, c);
      p4[i] = p;
      g4[i] = g;
      m4[i] = m;
      v4[i] = v;
      store_copy4(k, i, p);
    }
  }
  for (int64_t i = done + threadIdx.x; i < k.n; i += kThreads) {
    update(k.p[i], k.g[i], k.m[i], k.v[i], scaled, factor, c);
    store_copy(k, i, k.p[i]);
  }
}

struct SumAndNorm {
  double sum, norm;
};

// Σ g² over the plan's grads and its root; writes the clip factor to grad_scale when given.
SumAndNorm norm_of(Plan& plan, double max_norm, float* grad_scale) {
  const int dev = plan.device;
  loft::cuda::set_device(dev);
  double* partials = static_cast<double*>(plan.partials.data());
  if (plan.chunks > 0) {
    chunk_sum_squares<<<unsigned(plan.chunks), kThreads, 0, loft::cuda::stream(dev)>>>(
        static_cast<const Chunk*>(plan.table.data()), partials);
    loft::cuda::check_launch("chunk_sum_squares");
  }
  finish_norm<<<1, kThreads, 0, loft::cuda::stream(dev)>>>(partials, plan.chunks, max_norm,
                                                     static_cast<double*>(plan.result.data()),
                                                     grad_scale);
  loft::cuda::check_launch("finish_norm");
  const Tensor host = plan.result.to(Device::cpu());
  SumAndNorm out;
  std::memcpy(&out.sum, static_cast<const char*>(host.data()), sizeof(double));
  std::memcpy(&out.norm, static_cast<const char*>(host.data()) + sizeof(double), sizeof(double));
  return out;
}

}  // namespace

double sum_squares(const Tensor& x) {
  AdamWTensors one;
  one.grads = {x};
  return norm_of(plan_for(one, x.device()), 0.0, nullptr).sum;
}

double grad_norm_clip(AdamWTensors& t, double max_norm, Tensor& grad_scale) {
  return norm_of(plan_for(t, grad_scale.device()), max_norm, grad_scale.ptr<float>()).norm;
}

void adamw_all(AdamWTensors& t, const Tensor* grad_scale, const AdamWStep& s) {
  Plan& plan = plan_for(t, t.params[0].device());
  if (plan.chunks == 0) return;
  loft::cuda::set_device(plan.device);
  chunk_adamw<<<unsigned(plan.chunks), kThreads, 0, loft::cuda::stream(plan.device)>>>(
      static_cast<const Chunk*>(plan.table.data()), grad_scale ? grad_scale->ptr<float>() : nullptr,
      adamw_consts(s));
  loft::cuda::check_launch("chunk_adamw");
}

}  // namespace loft::ops::cuda
