// What each backend implements. ops.cpp validates every call before it reaches a backend, so
// implementations may assume consistent shapes, dtypes and devices.
#pragma once
#include "engine/ops/ops.h"

namespace loft::ops {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmOptions& opt) = 0;
  virtual void convert(const Tensor& src, Tensor& dst) = 0;
  virtual void axpy(float alpha, const Tensor& x, Tensor& y) = 0;
  virtual void scale(Tensor& x, float alpha) = 0;
  virtual void fill_random(Tensor& x, uint64_t seed, float std) = 0;
  virtual void rmsnorm(const Tensor& x, const Tensor& weight, float eps, Tensor& y,
                       Tensor* rstd) = 0;
  virtual void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                const Tensor& rstd, Tensor& dx, Tensor* dweight) = 0;
  virtual void add_rmsnorm(const Tensor& residual, Tensor& x, const Tensor& weight, float eps,
                           Tensor& y, Tensor* rstd) = 0;
  virtual void rmsnorm_backward_add(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                    const Tensor& rstd, const Tensor& add, Tensor& dx,
                                    Tensor* dweight) = 0;
  virtual void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse) = 0;
  virtual void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  virtual void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up,
                               Tensor& dgate, Tensor& dup) = 0;
  virtual void embedding(const Tensor& table, const Tensor& ids, Tensor& out) = 0;
  virtual void embedding_backward(const Tensor& dout, const Tensor& ids, Tensor& dtable) = 0;
  virtual void cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& losses,
                             Tensor* dlogits, float grad_scale) = 0;
  virtual void attention(const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& doc_start, int64_t seq, float scale, Tensor& out,
                         Tensor& lse) = 0;
  virtual void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const Tensor& out, const Tensor& lse,
                                  const Tensor& doc_start, int64_t seq, float scale, Tensor& dq,
                                  Tensor& dk, Tensor& dv) = 0;
  virtual void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                     const AdamWStep& s) = 0;
  virtual double sum_squares(const Tensor& x) = 0;
  virtual double grad_norm_clip(AdamWTensors& t, double max_norm, Tensor& grad_scale) = 0;
  virtual void adamw_all(AdamWTensors& t, const Tensor* grad_scale, const AdamWStep& s) = 0;
};

Backend& cpu_backend();
#ifdef LOFT_WITH_CUDA
Backend& cuda_backend();
#endif
// The backend for `device`; throws a clear Error when it was not built.
Backend& backend_for(Device device);

}  // namespace loft::ops
