// Shared pieces of the CUDA op kernels: fp32 <-> storage-dtype conversion, 16-byte vectorised
// chunk loads/stores, warp/block reductions, dtype dispatch and launch sizing. Include only from
// .cu.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>

#include "engine/device/cuda_context.h"
#include "engine/tensor/tensor.h"

namespace loft::ops::cuda_kernels {

using bf16 = __nv_bfloat16;
using f16 = __half;

// ---- element conversion (storage dtype <-> fp32; stores round to nearest even) --------------
template <typename T>
__device__ __forceinline__ float to_f32(T x);
template <>
__device__ __forceinline__ float to_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ float to_f32<bf16>(bf16 x) {
  return __bfloat162float(x);
}
template <>
__device__ __forceinline__ float to_f32<f16>(f16 x) {
  return __half2float(x);
}

template <typename T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 from_f32<bf16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ f16 from_f32<f16>(float x) {
  return __float2half_rn(x);
}

// v as a T stores it, read back (a value rounded to the storage dtype before the next step uses
// it, as two separate ops would have stored it between them).
template <typename T>
__device__ __forceinline__ float round_to(float v) {
  return to_f32(from_f32<T>(v));
}

// ---- 16-byte vectorised chunks of 8 elements ------------------------------------------------
// A chunk is 8 consecutive elements read or written with 16-byte accesses (two for F32). Callers
// check aligned16() on every pointer first: views and odd row lengths are often not aligned.
constexpr int kChunk = 8;

__host__ __device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

template <typename T>
__device__ __forceinline__ void load_chunk(const T* p, float (&v)[kChunk]);
template <>
__device__ __forceinline__ void load_chunk<float>(const float* p, float (&v)[kChunk]) {
  const float4 a = reinterpret_cast<const float4*>(p)[0];
  const float4 b = reinterpret_cast<const float4*>(p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
  v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
template <>
__device__ __forceinline__ void load_chunk<bf16>(const bf16* p, float (&v)[kChunk]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 f = __bfloat1622float2(h[k]);
    v[2 * k] = f.x, v[2 * k + 1] = f.y;
  }
}
template <>
__device__ __forceinline__ void load_chunk<f16>(const f16* p, float (&v)[kChunk]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 f = __half22float2(h[k]);
    v[2 * k] = f.x, v[2 * k + 1] = f.y;
  }
}

template <typename T>
__device__ __forceinline__ void store_chunk(T* p, const float (&v)[kChunk]);
template <>
__device__ __forceinline__ void store_chunk<float>(float* p, const float (&v)[kChunk]) {
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
template <>
__device__ __forceinline__ void store_chunk<bf16>(bf16* p, const float (&v)[kChunk]) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k) h[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
  *reinterpret_cast<uint4*>(p) = u;
}
template <>
__device__ __forceinline__ void store_chunk<f16>(f16* p, const float (&v)[kChunk]) {
  uint4 u;
  __half2* h = reinterpret_cast<__half2*>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k) h[k] = __floats2half2_rn(v[2 * k], v[2 * k + 1]);
  *reinterpret_cast<uint4*>(p) = u;
}

// ---- reductions (blockDim.x must be a multiple of 32) ---------------------------------------
// Sum and max over a full warp, the same butterfly order on every lane.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block, returned to every thread. `scratch`: 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by an earlier call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x >> 5) ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

// An F32 amax kept as its bit pattern: non-negative floats order like their bits, so atomicMax
// on them is a float max (zeroed memory is 0.0f). The per-tensor quantizer's amax, and the ops'
// amax outputs (op_list.def's *_amax) that hand it theirs.
// Lane 0 of a warp folds m (>= 0) in: most find the running value already at least theirs and
// only read it, instead of an atomic on the one address (thousands of blocks' atomics would
// queue behind each other). The value only grows, so a stale read costs one atomic more.
__device__ __forceinline__ void fold_amax_bits(float m, unsigned* amax_bits) {
  const unsigned bits = __float_as_uint(m);
  if (bits > *reinterpret_cast<volatile unsigned*>(amax_bits)) atomicMax(amax_bits, bits);
}

// Folds every thread's m (>= 0) into *amax_bits with one fold per block. Every thread of the
// block must call it (1-D or 2-D blocks of a multiple of 32 threads). For grid-stride kernels,
// whose blocks are few and long.
__device__ __forceinline__ void block_amax(float m, unsigned* amax_bits) {
  m = warp_max(m);
  __shared__ float warp_maxes[32];
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5, warps = int(blockDim.x * blockDim.y) >> 5;
  __syncthreads();  // warp_maxes may still be read by an earlier call
  if (lane == 0) warp_maxes[warp] = m;
  __syncthreads();
  if (warp == 0) {
    m = warp_max(lane < warps ? warp_maxes[lane] : 0.0f);
    if (lane == 0) fold_amax_bits(m, amax_bits);
  }
}

// The same with one fold per warp and no block barrier: for the ops that write their outputs a
// row (or token) per block, whose blocks are many and short. Every lane of each warp must call it.
__device__ __forceinline__ void warp_amax(float m, unsigned* amax_bits) {
  m = warp_max(m);
  if ((threadIdx.x & 31) == 0) fold_amax_bits(m, amax_bits);
}

// The largest |v| a thread has seen, as stored in T (rounding is monotone: the rounded maximum is
// the maximum of the rounded values). fmaxf skips NaN, as the quantizer's amax does.
template <typename T>
__device__ __forceinline__ float stored_abs_max(float m) {
  return fabsf(to_f32(from_f32<T>(m)));
}

// ---- host side: dtype dispatch and launch sizing --------------------------------------------
template <typename T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>{}) for an activation dtype (F32 or BF16).
template <typename F>
void dispatch_activation(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::F32:
      f(Tag<float>{});
      return;
    case DType::BF16:
      f(Tag<bf16>{});
      return;
    default:
      throw Error(cat(op, ": no CUDA kernel for dtype ", dtype_name(dt)));
  }
}
// Same, also accepting F16 (convert only).
template <typename F>
void dispatch_float(DType dt, const char* op, F&& f) {
  if (dt == DType::F16) return f(Tag<f16>{});
  dispatch_activation(dt, op, f);
}

// f(std::bool_constant<a>{}, std::bool_constant<b>{}): two run-time flags as template arguments
// (a kernel's variants, e.g. with and without an amax output, each compiled on its own).
template <typename F>
void with_flags(bool a, bool b, F&& f) {
  if (a)
    b ? f(std::true_type{}, std::true_type{}) : f(std::true_type{}, std::false_type{});
  else
    b ? f(std::false_type{}, std::true_type{}) : f(std::false_type{}, std::false_type{});
}

// An op's amax output (op_list.def) as the bits warp_amax folds into; null when not asked.
inline unsigned* amax_out_bits(Tensor* amax) { return amax ? amax->ptr<unsigned>() : nullptr; }

// Makes the tensor's device current and returns its index; loft work runs on loft::cuda::stream(index).
inline int use_device(const Tensor& t) {
  const int device = t.device().index;
  loft::cuda::set_device(device);
  return device;
}

// A device attribute, queried once per (attribute, device): these never change in a process.
inline int device_attribute(cudaDeviceAttr attr, int device) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, int> cache;
  std::lock_guard lock(mu);
  auto it = cache.find({int(attr), device});
  if (it != cache.end()) return it->second;
  int value = 0;
  LOFT_CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  return cache[{int(attr), device}] = value;
}

inline int sm_count(int device) { return device_attribute(cudaDevAttrMultiProcessorCount, device); }

// The most shared memory one block may opt into on `device`.
inline int max_shared_optin(int device) {
  return device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
}

// Lets `kernel` launch with `bytes` of dynamic shared memory (past 48 KiB a kernel must opt in),
// asking the driver only when a kernel needs more on a device than it was granted before.
template <typename Kernel>
void allow_dynamic_smem(Kernel* kernel, size_t bytes, int device) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, size_t> granted;
  std::lock_guard lock(mu);
  size_t& g = granted[{reinterpret_cast<const void*>(kernel), device}];
  if (g >= bytes) return;
  LOFT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  g = bytes;
}

// Blocks for a grid-stride loop over `work` items: enough to fill the GPU, no more.
inline unsigned grid_for(int64_t work, int threads, int device) {
  const int64_t need = (std::max<int64_t>(work, 1) + threads - 1) / threads;
  return unsigned(std::min<int64_t>(need, int64_t(sm_count(device)) * 16));
}

// Threads for a one-block-per-row kernel over rows of `n` elements (a multiple of 32, <= cap).
inline int row_threads(int64_t n, int cap = 1024) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const int64_t t = (chunks + 31) / 32 * 32;
  return int(std::clamp<int64_t>(t, 32, cap));
}

}  // namespace loft::ops::cuda_kernels
