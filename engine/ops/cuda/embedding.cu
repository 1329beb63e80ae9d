// Embedding lookup (one block per token, 16-byte row copies) and its backward (atomicAdd into
// the F32 table gradient). Out-of-range ids raise a DeviceFlag that becomes an Error.
#include "engine/ops/ops.h"
#include "engine/ops/cuda/device_flag.h"
#include "engine/ops/cuda/kernel_util.cuh"

namespace loft::ops {

using namespace cuda_kernels;

namespace {

template <typename T>
__global__ void embedding_kernel(const T* table, const int32_t* ids, T* out, int64_t vocab,
                                 int64_t d, uint32_t* bad) {
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  T* o = out + t * d;
  if (id < 0 || id >= vocab) {
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) o[j] = from_f32<T>(0.0f);
    if (threadIdx.x == 0) atomicMin(bad, uint32_t(t));
    return;
  }
  const T* row = table + int64_t(id) * d;
  int64_t done = 0;
  if (aligned16(row) && aligned16(o)) {
    constexpr int kPer = 16 / sizeof(T);
    const int64_t vecs = d / kPer;
    for (int64_t v = threadIdx.x; v < vecs; v += blockDim.x)
      reinterpret_cast<uint4*>(o)[v] = reinterpret_cast<const uint4*>(row)[v];
    done = vecs * kPer;
  }
  for (int64_t j = done + threadIdx.x; j < d; j += blockDim.x) o[j] = row[j];
}

template <typename T>
__global__ void embedding_backward_kernel(const T* dout, const int32_t* ids, float* dtable,
                                          int64_t vocab, int64_t d, uint32_t* bad) {
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  if (id < 0 || id >= vocab) {
    if (threadIdx.x == 0) atomicMin(bad, uint32_t(t));
    return;
  }
  const T* g = dout + t * d;
  float* row = dtable + int64_t(id) * d;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) atomicAdd(row + j, to_f32(g[j]));
}

[[noreturn]] void throw_bad_id(const char* op, const Tensor& ids, uint32_t pos, int64_t vocab) {
  const int64_t id = ids.slice(pos, 1).to_int_vector()[0];
  throw Error(cat(op, ": token id ", id, " at position ", pos, " is outside the vocabulary [0, ",
                  vocab, ")"));
}

}  // namespace

void cuda::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  const int dev = use_device(table);
  const int64_t tokens = ids.size(0), vocab = table.size(0), d = table.size(1);
  if (tokens == 0) return;
  LOFT_CHECK(tokens < int64_t(DeviceFlag::kClear) && tokens <= INT32_MAX, "embedding: ", tokens,
             " tokens are too many for one launch");
  DeviceFlag bad(dev);
  dispatch_activation(table.dtype(), "embedding", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int threads =
        int(std::clamp<int64_t>((d * int64_t(sizeof(T)) / 16 + 31) / 32 * 32, 32, 256));
    embedding_kernel<T><<<unsigned(tokens), threads, 0, loft::cuda::stream(dev)>>>(
        table.ptr<const T>(), ids.ptr<const int32_t>(), out.ptr<T>(), vocab, d, bad.ptr());
    loft::cuda::check_launch("embedding");
  });
  if (auto pos = bad.first_raised()) throw_bad_id("embedding", ids, *pos, vocab);
}

void cuda::embedding_backward(const Tensor& dout, const Tensor& ids, Tensor& dtable) {
  const int dev = use_device(dout);
  const int64_t tokens = ids.size(0), vocab = dtable.size(0), d = dtable.size(1);
  if (tokens == 0 || d == 0) return;
  LOFT_CHECK(tokens < int64_t(DeviceFlag::kClear) && tokens <= INT32_MAX,
             "embedding_backward: ", tokens, " tokens are too many for one launch");
  DeviceFlag bad(dev);
  dispatch_activation(dout.dtype(), "embedding_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int threads = int(std::clamp<int64_t>((d + 31) / 32 * 32, 32, 256));
    embedding_backward_kernel<T><<<unsigned(tokens), threads, 0, loft::cuda::stream(dev)>>>(
        dout.ptr<const T>(), ids.ptr<const int32_t>(), dtable.ptr<float>(), vocab, d, bad.ptr());
    loft::cuda::check_launch("embedding_backward");
  });
  if (auto pos = bad.first_raised()) throw_bad_id("embedding_backward", ids, *pos, vocab);
}

}  // namespace loft::ops
