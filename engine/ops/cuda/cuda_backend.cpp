#include "engine/ops/cuda/cuda_backend.h"

#include "engine/ops/cuda/attention_cuda.h"
#include "engine/ops/cuda/optim_cuda.h"

namespace loft::ops {

void CudaBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& doc_start, int64_t seq, float scale, Tensor& out,
                            Tensor& lse) {
  cuda_attention::forward(q, k, v, doc_start, seq, scale, out, lse);
}

void CudaBackend::attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor& out, const Tensor& lse,
                                     const Tensor& doc_start, int64_t seq, float scale,
                                     Tensor& dq, Tensor& dk, Tensor& dv) {
  cuda_attention::backward(dout, q, k, v, out, lse, doc_start, seq, scale, dq, dk, dv);
}

void CudaBackend::adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                        const AdamWStep& s) {
  cuda_optim::adamw(param, grad, m, v, s);
}

double CudaBackend::sum_squares(const Tensor& x) { return cuda_optim::sum_squares(x); }

double CudaBackend::grad_norm_clip(AdamWTensors& t, double max_norm, Tensor& grad_scale) {
  return cuda_optim::grad_norm_clip(t, max_norm, grad_scale);
}

void CudaBackend::adamw_all(AdamWTensors& t, const Tensor* grad_scale, const AdamWStep& s) {
  cuda_optim::adamw_all(t, grad_scale, s);
}

Backend& cuda_backend() {
  static CudaBackend backend;
  return backend;
}

}  // namespace loft::ops
