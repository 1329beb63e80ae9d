// convert, axpy, add_bias, scale: pointwise ops in fp32 over F32/BF16 (and F16 for convert).
#include "engine/ops/ops.h"
#include "engine/ops/cuda/elementwise_map.cuh"

namespace loft::ops {

using namespace cuda_kernels;

namespace {
struct Copy {
  __device__ void operator()(const float (&x)[1], float (&y)[1]) const { y[0] = x[0]; }
};
struct Axpy {  // inputs: x, y
  float alpha;
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const {
    y[0] = x[1] + alpha * x[0];
  }
};
// y[i] += bias[i % d], grid-stride.
template <typename T, typename B>
__global__ void add_bias_kernel(T* y, const B* bias, int64_t n, int64_t d) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(to_f32(y[i]) + to_f32(bias[i % d]));
}
struct Scale {
  float alpha;
  __device__ void operator()(const float (&x)[1], float (&y)[1]) const { y[0] = x[0] * alpha; }
};
}  // namespace

void cuda::convert(const Tensor& src, Tensor& dst) {
  const int dev = use_device(dst);
  if (src.dtype() == dst.dtype()) {
    if (src.data() != dst.data())
      LOFT_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(),
                                      cudaMemcpyDeviceToDevice, loft::cuda::stream(dev)));
    return;
  }
  dispatch_float(src.dtype(), "convert", [&](auto src_tag) {
    using TS = typename decltype(src_tag)::type;
    dispatch_float(dst.dtype(), "convert", [&](auto dst_tag) {
      using TD = typename decltype(dst_tag)::type;
      launch_map<TS, TD, 1, 1>("convert", dev, {{src.ptr<const TS>()}}, {{dst.ptr<TD>()}},
                               src.numel(), Copy{});
    });
  });
}

void cuda::axpy(float alpha, const Tensor& x, Tensor& y) {
  const int dev = use_device(y);
  dispatch_activation(y.dtype(), "axpy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map<T, T, 2, 1>("axpy", dev, {{x.ptr<const T>(), y.ptr<const T>()}}, {{y.ptr<T>()}},
                           y.numel(), Axpy{alpha});
  });
}

void cuda::add_bias(Tensor& y, const Tensor& bias) {
  const int dev = use_device(y);
  dispatch_activation(y.dtype(), "add_bias", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_activation(bias.dtype(), "add_bias", [&](auto btag) {
      using B = typename decltype(btag)::type;
      add_bias_kernel<<<grid_for(y.numel(), 256, dev), 256, 0, loft::cuda::stream(dev)>>>(
          y.ptr<T>(), bias.ptr<const B>(), y.numel(), y.size(1));
    });
  });
  loft::cuda::check_launch("add_bias");
}

void cuda::scale(Tensor& x, float alpha) {
  const int dev = use_device(x);
  dispatch_activation(x.dtype(), "scale", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map<T, T, 1, 1>("scale", dev, {{x.ptr<const T>()}}, {{x.ptr<T>()}}, x.numel(),
                           Scale{alpha});
  });
}

}  // namespace loft::ops
