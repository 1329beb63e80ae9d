// RMSNorm forward and backward on the CPU. Row reductions accumulate in double; elementwise
// math is fp32, in the order transformers' LlamaRMSNorm uses: weight * (x * rstd).
#include <cmath>
#include <vector>

#include "engine/ops/cpu/cpu_ops.h"

namespace loft::ops::cpu {

void rmsnorm(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor* rstd) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  const float* xp = x.ptr<float>();
  const float* w = weight.ptr<float>();
  float* yp = y.ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = xp + r * d;
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += double(xr[j]) * double(xr[j]);
    const float mean = float(ss / double(d));
    const float rs = 1.0f / std::sqrt(mean + eps);
    if (rstd) rstd->ptr<float>()[r] = rs;
    float* yr = yp + r * d;
    for (int64_t j = 0; j < d; ++j) yr[j] = w[j] * (xr[j] * rs);
  }
}

// y = w ⊙ x·rstd with rstd = (mean(x²)+eps)^-½ gives
// dx = rstd·(w⊙dy) − rstd³·x·mean(x⊙w⊙dy),  dw = Σ_rows dy ⊙ x·rstd.
// Each element of dy and x is read before dx's element is written, so dx may alias dy or x.
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      Tensor& dx, Tensor* dweight) {
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  const float* xp = x.ptr<float>();
  const float* dyp = dy.ptr<float>();
  const float* w = weight.ptr<float>();
  const float* rsp = rstd.ptr<float>();
  float* dxp = dx.ptr<float>();
  std::vector<double> dw(dweight ? size_t(d) : 0, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = xp + r * d;
    const float* dyr = dyp + r * d;
    float* dxr = dxp + r * d;
    const double rs = rsp[r];
    double dot = 0;
    for (int64_t j = 0; j < d; ++j) dot += double(xr[j]) * double(w[j]) * double(dyr[j]);
    const double c = rs * rs * rs * dot / double(d);
    for (int64_t j = 0; j < d; ++j) {
      const double xj = xr[j], dyj = dyr[j];
      if (dweight) dw[size_t(j)] += dyj * xj * rs;
      dxr[j] = float(rs * double(w[j]) * dyj - c * xj);
    }
  }
  if (dweight) {
    float* dwp = dweight->ptr<float>();
    for (int64_t j = 0; j < d; ++j) dwp[j] += float(dw[size_t(j)]);
  }
}

}  // namespace loft::ops::cpu
