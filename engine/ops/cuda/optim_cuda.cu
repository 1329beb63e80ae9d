// The per-tensor CUDA AdamW step (ops::adamw on one tensor). The optimizer itself runs the
// multi-tensor kernels (multi_tensor_optim.cu), which also hold the sum of squares.
#include <algorithm>

#include "engine/device/cuda_context.h"
#include "engine/ops/cuda/adamw_element.cuh"
#include "engine/ops/ops.h"

namespace loft::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n,
                             AdamWConsts c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    adamw_element(p[i], m[i], v[i], g[i], c);
}

}  // namespace

void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& s) {
  const int64_t n = param.numel();
  if (n == 0) return;
  const int dev = param.device().index;
  loft::cuda::set_device(dev);
  const unsigned blocks = unsigned(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks));
  adamw_kernel<<<blocks, kThreads, 0, loft::cuda::stream(dev)>>>(
      param.ptr<float>(), grad.ptr<float>(), m.ptr<float>(), v.ptr<float>(), n, adamw_consts(s));
  loft::cuda::check_launch("adamw");
}

}  // namespace loft::ops::cuda
