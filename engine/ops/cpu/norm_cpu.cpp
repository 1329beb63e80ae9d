// RMSNorm forward and backward on the CPU. Row reductions accumulate in double; elementwise
// math is fp32, in the order transformers' LlamaRMSNorm uses: weight * (x * rstd).
#include <cmath>
#include <vector>

#include "engine/ops/cpu/amax_cpu.h"
#include "engine/ops/ops.h"

namespace loft::ops::cpu {

namespace {

// Normalises each row of x into y. With `residual`, x's row first becomes residual + x (the fp32
// sum axpy stores) and is normalised from those stored values: add_rmsnorm.
void rmsnorm_rows(const float* residual, float* xp, const float* w, float eps, float* yp,
                  float* rstd, int64_t rows, int64_t d) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = xp + r * d;
    if (residual)
      for (int64_t j = 0; j < d; ++j) xr[j] = residual[r * d + j] + xr[j];
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += double(xr[j]) * double(xr[j]);
    const float mean = float(ss / double(d));
    const float rs = 1.0f / std::sqrt(mean + eps);
    if (rstd) rstd[r] = rs;
    float* yr = yp + r * d;
    for (int64_t j = 0; j < d; ++j) yr[j] = w[j] * (xr[j] * rs);
  }
}

int64_t rows_of(const Tensor& x) {
  const int64_t d = x.size(-1);
  return d == 0 ? 0 : x.numel() / d;
}

}  // namespace

void rmsnorm(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor* rstd,
             Tensor* y_amax) {
  // x is only read when no residual is given.
  rmsnorm_rows(nullptr, x.ptr<float>(), weight.ptr<float>(), eps, y.ptr<float>(),
               rstd ? rstd->ptr<float>() : nullptr, rows_of(x), x.size(-1));
  fold_amax(y_amax, y);
}

void add_rmsnorm(const Tensor& residual, Tensor& x, const Tensor& weight, float eps, Tensor& y,
                 Tensor* rstd, Tensor* y_amax) {
  rmsnorm_rows(residual.ptr<float>(), x.ptr<float>(), weight.ptr<float>(), eps, y.ptr<float>(),
               rstd ? rstd->ptr<float>() : nullptr, rows_of(x), x.size(-1));
  fold_amax(y_amax, y);
}

// y = w ⊙ x·rstd with rstd = (mean(x²)+eps)^-½ gives
// dx = rstd·(w⊙dy) − rstd³·x·mean(x⊙w⊙dy),  dw = Σ_rows dy ⊙ x·rstd.
// With `add`, dx = that (rounded to fp32) + add, as rmsnorm_backward then axpy store it.
// Each element of dy, x and add is read before dx's element is written, so dx may alias them.
namespace {
void norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                   const Tensor* add, Tensor& dx, Tensor* dweight) {
  const int64_t d = x.size(-1);
  const int64_t rows = rows_of(x);
  const float* xp = x.ptr<float>();
  const float* dyp = dy.ptr<float>();
  const float* w = weight.ptr<float>();
  const float* rsp = rstd.ptr<float>();
  const float* ap = add ? add->ptr<float>() : nullptr;
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
      const float g = float(rs * double(w[j]) * dyj - c * xj);
      dxr[j] = ap ? g + ap[r * d + j] : g;
    }
  }
  if (dweight) {
    float* dwp = dweight->ptr<float>();
    for (int64_t j = 0; j < d; ++j) dwp[j] += float(dw[size_t(j)]);
  }
}

}  // namespace

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      Tensor& dx, Tensor* dweight) {
  norm_backward(dy, x, weight, rstd, nullptr, dx, dweight);
}

void rmsnorm_backward_add(const Tensor& dy, const Tensor& x, const Tensor& weight,
                          const Tensor& rstd, const Tensor& add, Tensor& dx, Tensor* dweight,
                          Tensor* dx_amax) {
  norm_backward(dy, x, weight, rstd, &add, dx, dweight);
  fold_amax(dx_amax, dx);
}

}  // namespace loft::ops::cpu
