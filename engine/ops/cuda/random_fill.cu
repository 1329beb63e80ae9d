// fill_random on CUDA: one thread per element (grid-stride), the same counter_rng formula as the
// CPU, so F32 output matches it bit for bit and BF16 is that value rounded to nearest even.
#include "engine/ops/counter_rng.h"
#include "engine/ops/ops.h"
#include "engine/ops/cuda/kernel_util.cuh"

namespace loft::ops {

using namespace cuda_kernels;

namespace {
template <typename T>
__global__ void fill_random_kernel(T* out, int64_t n, uint64_t key, float scale) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = from_f32<T>(counter_rng::uniform(key, uint64_t(i), scale));
}
}  // namespace

void cuda::fill_random(Tensor& x, uint64_t seed, float std) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const int dev = use_device(x);
  const uint64_t key = counter_rng::key(seed);
  const float scale = counter_rng::uniform_scale(std);
  dispatch_activation(x.dtype(), "fill_random", [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int kThreads = 256;
    fill_random_kernel<T><<<grid_for(n, kThreads, dev), kThreads, 0, loft::cuda::stream(dev)>>>(
        x.ptr<T>(), n, key, scale);
    loft::cuda::check_launch("fill_random");
  });
}

}  // namespace loft::ops
