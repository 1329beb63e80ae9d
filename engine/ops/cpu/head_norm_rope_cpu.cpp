// Per-head RMSNorm then RoPE on the CPU: the two reference ops composed, so the fused op's
// reference is, by construction, what rmsnorm then rope compute.
#include "engine/ops/cpu/amax_cpu.h"
#include "engine/ops/ops.h"

namespace loft::ops::cpu {

void head_norm_rope(const Tensor& x, const Tensor& weight, float eps, const Tensor& positions,
                    const Tensor& inv_freq, Tensor& y, Tensor* rstd) {
  const int64_t rows = x.size(0) * x.size(1), d = x.size(2);
  Tensor y2 = y.view({rows, d});
  rmsnorm(x.view({rows, d}), weight, eps, y2, rstd);
  rope(y, positions, inv_freq);
}

void head_norm_rope_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                             const Tensor& rstd, const Tensor& positions, const Tensor& inv_freq,
                             Tensor& dx, Tensor* dx_amax) {
  const int64_t rows = x.size(0) * x.size(1), d = x.size(2);
  Tensor g = dy.clone();  // dx may alias dy
  rope(g, positions, inv_freq, /*inverse=*/true);
  Tensor dx2 = dx.view({rows, d});
  rmsnorm_backward(g.view({rows, d}), x.view({rows, d}), weight, rstd, dx2);
  fold_amax(dx_amax, dx);
}

}  // namespace loft::ops::cpu
