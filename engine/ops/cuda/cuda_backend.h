// The CUDA implementation of the op table. Each op family lives in its own file in this folder
// (gemm_cublaslt.cpp, elementwise.cu, random_fill.cu, rmsnorm.cu, rope.cu, swiglu.cu,
// embedding.cu, cross_entropy.cu); all run on cuda::stream(device) of their tensors' device.
// Inputs arrive validated by ops.cpp.
#pragma once
#include "engine/ops/backend.h"

namespace loft::ops {

class CudaBackend final : public Backend {
 public:
  void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmOptions& opt) override;
  void convert(const Tensor& src, Tensor& dst) override;
  void axpy(float alpha, const Tensor& x, Tensor& y) override;
  void scale(Tensor& x, float alpha) override;
  void fill_random(Tensor& x, uint64_t seed, float std) override;
  void rmsnorm(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor* rstd) override;
  void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                        Tensor& dx, Tensor* dweight) override;
  void add_rmsnorm(const Tensor& residual, Tensor& x, const Tensor& weight, float eps, Tensor& y,
                   Tensor* rstd) override;
  void rmsnorm_backward_add(const Tensor& dy, const Tensor& x, const Tensor& weight,
                            const Tensor& rstd, const Tensor& add, Tensor& dx,
                            Tensor* dweight) override;
  void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse) override;
  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate,
                       Tensor& dup) override;
  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void embedding_backward(const Tensor& dout, const Tensor& ids, Tensor& dtable) override;
  void cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& losses, Tensor* dlogits,
                     float grad_scale) override;
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
                 int64_t seq, float scale, Tensor& out, Tensor& lse) override;
  void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& out, const Tensor& lse, const Tensor& doc_start,
                          int64_t seq, float scale, Tensor& dq, Tensor& dk, Tensor& dv) override;
  void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
             const AdamWStep& s) override;
  double sum_squares(const Tensor& x) override;
  double grad_norm_clip(AdamWTensors& t, double max_norm, Tensor& grad_scale) override;
  void adamw_all(AdamWTensors& t, const Tensor* grad_scale, const AdamWStep& s) override;
};

}  // namespace loft::ops
