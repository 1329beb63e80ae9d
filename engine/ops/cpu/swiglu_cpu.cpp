// SwiGLU (silu(gate) · up) forward and backward on the CPU, in fp32.
#include <cmath>

#include "engine/ops/cpu/amax_cpu.h"
#include "engine/ops/ops.h"

namespace loft::ops::cpu {
namespace {

// 1/(1+e^−g): for very negative g, e^−g overflows to inf and the result is a clean 0.
inline float sigmoid(float g) { return 1.0f / (1.0f + std::exp(-g)); }

}  // namespace

void swiglu(const Tensor& gate, const Tensor& up, Tensor& out, Tensor* out_amax) {
  const float* g = gate.ptr<float>();
  const float* u = up.ptr<float>();
  float* o = out.ptr<float>();
  for (int64_t i = 0, n = gate.numel(); i < n; ++i) o[i] = g[i] * sigmoid(g[i]) * u[i];
  fold_amax(out_amax, out);
}

// silu'(g) = s·(1 + g·(1 − s)), s = sigmoid(g). Inputs are read before outputs are written, per
// element, so dgate/dup may alias gate/up (and dout).
void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate,
                     Tensor& dup, Tensor* dgate_amax, Tensor* dup_amax) {
  const float* d = dout.ptr<float>();
  const float* g = gate.ptr<float>();
  const float* u = up.ptr<float>();
  float* dg = dgate.ptr<float>();
  float* du = dup.ptr<float>();
  for (int64_t i = 0, n = gate.numel(); i < n; ++i) {
    const float gi = g[i], ui = u[i], di = d[i];
    const float s = sigmoid(gi);
    dg[i] = di * ui * (s * (1.0f + gi * (1.0f - s)));
    du[i] = di * (gi * s);
  }
  fold_amax(dgate_amax, dgate);
  fold_amax(dup_amax, dup);
}

}  // namespace loft::ops::cpu
