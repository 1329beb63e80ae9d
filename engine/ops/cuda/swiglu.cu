// SwiGLU forward and backward, pointwise in fp32. silu(g) = g·σ(g) with σ(g) = 1/(1+e^−g).
#include "engine/ops/ops.h"
#include "engine/ops/cuda/elementwise_map.cuh"

namespace loft::ops {

using namespace cuda_kernels;

namespace {
__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

struct Swiglu {  // inputs: gate, up
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const {
    y[0] = x[0] * sigmoid(x[0]) * x[1];
  }
};
// inputs: dout, gate, up; outputs: dgate, dup. silu'(g) = σ(g)·(1 + g·(1 − σ(g))).
struct SwigluBackward {
  __device__ void operator()(const float (&x)[3], float (&y)[2]) const {
    const float dout = x[0], g = x[1], up = x[2];
    const float s = sigmoid(g);
    y[0] = dout * up * (s * (1.0f + g * (1.0f - s)));
    y[1] = dout * (g * s);
  }
};
}  // namespace

void cuda::swiglu(const Tensor& gate, const Tensor& up, Tensor& out, Tensor* out_amax) {
  const int dev = use_device(out);
  dispatch_activation(gate.dtype(), "swiglu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map<T, T, 2, 1>("swiglu", dev, {{gate.ptr<const T>(), up.ptr<const T>()}},
                           {{out.ptr<T>()}}, gate.numel(), Swiglu{}, {{amax_out_bits(out_amax)}});
  });
}

void cuda::swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up,
                           Tensor& dgate, Tensor& dup, Tensor* dgate_amax, Tensor* dup_amax) {
  const int dev = use_device(gate);
  dispatch_activation(gate.dtype(), "swiglu_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map<T, T, 3, 2>("swiglu_backward", dev,
                           {{dout.ptr<const T>(), gate.ptr<const T>(), up.ptr<const T>()}},
                           {{dgate.ptr<T>(), dup.ptr<T>()}}, gate.numel(), SwigluBackward{},
                           {{amax_out_bits(dgate_amax), amax_out_bits(dup_amax)}});
  });
}

}  // namespace loft::ops
