// The scalars of an AdamW step that every backend must form the same way: the per-step constants
// (from the double hyper-parameters, as PyTorch forms them from its Python floats) and the factor
// torch.nn.utils.clip_grad_norm_ scales the gradients by. This header compiles as host code and,
// under nvcc, as device code too, so the CUDA kernel that computes the clip factor on the device
// gets the same bits the CPU path computes on the host.
#pragma once
#include <cmath>

#include "engine/ops/host_device.h"
#include "engine/ops/ops.h"

namespace loft::ops {

// What one element's update needs, rounded to fp32 once per step.
struct AdamWConsts {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, step_size, bc2_sqrt;
};

inline AdamWConsts adamw_consts(const AdamWStep& s) {
  const double bc1 = 1.0 - std::pow(double(s.beta1), double(s.step));
  const double bc2 = 1.0 - std::pow(double(s.beta2), double(s.step));
  return {.decay = float(1.0 - s.lr * s.weight_decay),
          .beta1 = float(s.beta1),
          .one_minus_beta1 = float(1.0 - s.beta1),
          .beta2 = float(s.beta2),
          .one_minus_beta2 = float(1.0 - s.beta2),
          .eps = float(s.eps),
          .step_size = float(s.lr / bc1),
          .bc2_sqrt = float(std::sqrt(bc2))};
}

// torch's clip_grad_norm_: max_norm / (norm + 1e-6) in double when max_norm > 0, the norm is
// finite and the factor is below 1, rounded to fp32 (the grads are scaled in fp32); else 1, which
// leaves every grad exactly as it is.
LOFT_HOST_DEVICE float clip_factor(double norm, double max_norm) {
  const bool finite = norm - norm == 0.0;  // false for ±inf and NaN, on host and device alike
  if (!(max_norm > 0) || !finite) return 1.0f;
  const double coef = max_norm / (norm + 1e-6);
  return coef < 1.0 ? float(coef) : 1.0f;
}

}  // namespace loft::ops
