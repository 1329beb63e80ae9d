// Softmax cross-entropy, one block per row: an online (max, sum-of-exp) pass over V in fp32,
// merged across the block, gives the row's log-sum-exp; only then is dlogits written, so it may
// overwrite the logits in place. Out-of-range targets raise a DeviceFlag that becomes an Error.
#include <cmath>
#include <type_traits>

#include "engine/ops/ops.h"
#include "engine/ops/cuda/device_flag.h"
#include "engine/ops/cuda/kernel_util.cuh"

namespace loft::ops {

using namespace cuda_kernels;

namespace {

// Running softmax statistics: m = max seen, s = Σ exp(x − m). Empty: m = −inf, s = 0.
struct MaxSum {
  float m, s;
};

__device__ __forceinline__ void add(MaxSum& a, float v) {
  if (v > a.m) {
    a.s = a.s * expf(a.m - v) + 1.0f;  // expf(−inf) = 0 for the first value
    a.m = v;
  } else if (a.m != -INFINITY) {  // both −inf would give NaN
    a.s += expf(v - a.m);
  }
}

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  if (a.m == -INFINITY) return b;
  if (b.m == -INFINITY) return a;
  const float m = fmaxf(a.m, b.m);
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ MaxSum block_merge(MaxSum a) {
  __shared__ float ms[32], ss[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    a = merge(a, {__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)});
  if (lane == 0) ms[warp] = a.m, ss[warp] = a.s;
  __syncthreads();
  a = lane < int(blockDim.x >> 5) ? MaxSum{ms[lane], ss[lane]} : MaxSum{-INFINITY, 0.0f};
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    a = merge(a, {__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)});
  return a;
}

// T: the logits' dtype; G: the gradient's (T, or bf16 for fp32 logits: rounded once here, so no
// separate conversion pass reads the fp32 gradient back).
template <typename T, typename G>
__global__ void cross_entropy_kernel(const T* logits, const int32_t* targets, float* losses,
                                     G* dlogits, int64_t v, float grad_scale, uint32_t* bad) {
  const int64_t row = blockIdx.x;
  const T* x = logits + row * v;
  G* dx = dlogits ? dlogits + row * v : nullptr;
  const int32_t target = targets[row];
  const bool ignored = target == kIgnoreIndex;
  if (ignored || target < 0 || target >= v) {  // uniform over the block
    if (threadIdx.x == 0) {
      losses[row] = 0.0f;
      if (!ignored) atomicMin(bad, uint32_t(row));
    }
    if (dx)
      for (int64_t j = threadIdx.x; j < v; j += blockDim.x) dx[j] = from_f32<G>(0.0f);
    return;
  }
  // Read by every thread before block_merge's barrier, i.e. before any dlogits write.
  const float x_target = to_f32(x[target]);

  const bool vec_in = aligned16(x);
  const int64_t chunks = vec_in ? v / kChunk : 0;
  MaxSum a{-INFINITY, 0.0f};
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float vals[kChunk];
    load_chunk(x + c * kChunk, vals);
#pragma unroll
    for (int e = 0; e < kChunk; ++e) add(a, vals[e]);
  }
  for (int64_t j = chunks * kChunk + threadIdx.x; j < v; j += blockDim.x) add(a, to_f32(x[j]));
  a = block_merge(a);
  const float lse = a.m + logf(a.s);
  if (threadIdx.x == 0) losses[row] = lse - x_target;
  if (!dx) return;

  const int64_t out_chunks = vec_in && aligned16(dx) ? chunks : 0;
  for (int64_t c = threadIdx.x; c < out_chunks; c += blockDim.x) {
    float vals[kChunk];
    load_chunk(x + c * kChunk, vals);
#pragma unroll
    for (int e = 0; e < kChunk; ++e) {
      const float onehot = c * kChunk + e == target ? 1.0f : 0.0f;
      vals[e] = grad_scale * (expf(vals[e] - lse) - onehot);
    }
    store_chunk(dx + c * kChunk, vals);
  }
  for (int64_t j = out_chunks * kChunk + threadIdx.x; j < v; j += blockDim.x) {
    const float onehot = j == target ? 1.0f : 0.0f;
    dx[j] = from_f32<G>(grad_scale * (expf(to_f32(x[j]) - lse) - onehot));
  }
}

}  // namespace

void cuda::cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& losses,
                                Tensor* dlogits, float grad_scale) {
  const int dev = use_device(logits);
  const int64_t rows = logits.size(0), v = logits.size(1);
  if (rows == 0) return;
  LOFT_CHECK(v > 0, "cross_entropy: logits ", logits.str(), " have an empty vocabulary");
  LOFT_CHECK(rows < int64_t(DeviceFlag::kClear) && rows <= INT32_MAX, "cross_entropy: ", rows,
             " rows are too many for one launch");
  DeviceFlag bad(dev);
  const bool rounded = dlogits && dlogits->dtype() != logits.dtype();  // ops.cpp checked the pair
  dispatch_activation(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto launch = [&](auto* dx) {
      using G = std::remove_pointer_t<decltype(dx)>;
      cross_entropy_kernel<T, G><<<unsigned(rows), row_threads(v, 512), 0, loft::cuda::stream(dev)>>>(
          logits.ptr<const T>(), targets.ptr<const int32_t>(), losses.ptr<float>(), dx, v,
          grad_scale, bad.ptr());
      loft::cuda::check_launch("cross_entropy");
    };
    if (rounded)
      launch(dlogits->ptr<bf16>());
    else
      launch(dlogits ? dlogits->ptr<T>() : static_cast<T*>(nullptr));
  });

  if (auto pos = bad.first_raised()) {
    const int64_t target = targets.slice(*pos, 1).to_int_vector()[0];
    throw Error(cat("cross_entropy: target ", target, " at row ", *pos,
                    " is outside the vocabulary [0, ", v, ") and is not the ignore index ",
                    kIgnoreIndex));
  }
}

}  // namespace loft::ops
