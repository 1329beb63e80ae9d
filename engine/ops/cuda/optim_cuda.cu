#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/device/cuda_context.h"
#include "engine/ops/cuda/optim_cuda.h"

namespace loft::ops::cuda_optim {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

unsigned blocks_for(int64_t n) {
  return unsigned(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

// Per-step constants, computed on the host exactly as optim_cpu.cpp does.
struct AdamWConsts {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, step_size, bc2_sqrt;
};

// torch.optim.AdamW's single-tensor update with the CPU reference's operation order; the _rn
// intrinsics keep nvcc from contracting into FMAs, which would round differently.
__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n,
                             AdamWConsts c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float gi = g[i];
    const float pi = __fmul_rn(p[i], c.decay);
    const float mi = __fadd_rn(__fmul_rn(c.beta1, m[i]), __fmul_rn(c.one_minus_beta1, gi));
    const float vi =
        __fadd_rn(__fmul_rn(c.beta2, v[i]), __fmul_rn(__fmul_rn(c.one_minus_beta2, gi), gi));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.bc2_sqrt), c.eps);
    m[i] = mi;
    v[i] = vi;
    p[i] = __fsub_rn(pi, __fdiv_rn(__fmul_rn(c.step_size, mi), denom));
  }
}

__global__ void sum_squares_kernel(const float* x, int64_t n, double* total) {
  double s = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    s += double(x[i]) * x[i];
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(~0u, s, o);
  __shared__ double warp_sums[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    double b = 0;
    for (int w = 0; w < kThreads / 32; ++w) b += warp_sums[w];
    atomicAdd(total, b);
  }
}

}  // namespace

void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& s) {
  const int64_t n = param.numel();
  if (n == 0) return;
  const int dev = param.device().index;
  cuda::set_device(dev);
  const double bc1 = 1.0 - std::pow(double(s.beta1), double(s.step));
  const double bc2 = 1.0 - std::pow(double(s.beta2), double(s.step));
  const AdamWConsts c{.decay = float(1.0 - s.lr * s.weight_decay),
                      .beta1 = float(s.beta1),
                      .one_minus_beta1 = float(1.0 - s.beta1),
                      .beta2 = float(s.beta2),
                      .one_minus_beta2 = float(1.0 - s.beta2),
                      .eps = float(s.eps),
                      .step_size = float(s.lr / bc1),
                      .bc2_sqrt = float(std::sqrt(bc2))};
  adamw_kernel<<<blocks_for(n), kThreads, 0, cuda::stream(dev)>>>(
      param.ptr<float>(), grad.ptr<float>(), m.ptr<float>(), v.ptr<float>(), n, c);
  cuda::check_launch("adamw");
}

double sum_squares(const Tensor& x) {
  const int64_t n = x.numel();
  if (n == 0) return 0.0;
  const int dev = x.device().index;
  cuda::set_device(dev);
  static_assert(sizeof(double) == sizeof(int64_t));
  Tensor total = Tensor::zeros({1}, DType::I64, x.device());  // all-zero bits are 0.0
  sum_squares_kernel<<<blocks_for(n), kThreads, 0, cuda::stream(dev)>>>(
      x.ptr<float>(), n, static_cast<double*>(total.data()));
  cuda::check_launch("sum_squares");
  const Tensor host = total.to(Device::cpu());
  double result;
  std::memcpy(&result, host.data(), sizeof(result));
  return result;
}

}  // namespace loft::ops::cuda_optim
