// cpu_backend(): the float32 reference backend. It only forwards to the per-family functions in
// cpu_ops.h, so each family stays in its own file.
#include "engine/ops/backend.h"
#include "engine/ops/cpu/attention_cpu.h"
#include "engine/ops/cpu/cpu_ops.h"
#include "engine/ops/cpu/optim_cpu.h"

namespace loft::ops {
namespace {

class CpuBackend final : public Backend {
 public:
  void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmOptions& opt) override {
    cpu::gemm(a, b, c, opt);
  }
  void convert(const Tensor& src, Tensor& dst) override { cpu::convert(src, dst); }
  void axpy(float alpha, const Tensor& x, Tensor& y) override { cpu::axpy(alpha, x, y); }
  void scale(Tensor& x, float alpha) override { cpu::scale(x, alpha); }
  void fill_random(Tensor& x, uint64_t seed, float std) override {
    cpu::fill_random(x, seed, std);
  }
  void rmsnorm(const Tensor& x, const Tensor& weight, float eps, Tensor& y,
               Tensor* rstd) override {
    cpu::rmsnorm(x, weight, eps, y, rstd);
  }
  void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                        const Tensor& rstd, Tensor& dx, Tensor* dweight) override {
    cpu::rmsnorm_backward(dy, x, weight, rstd, dx, dweight);
  }
  void add_rmsnorm(const Tensor& residual, Tensor& x, const Tensor& weight, float eps, Tensor& y,
                   Tensor* rstd) override {
    cpu::add_rmsnorm(residual, x, weight, eps, y, rstd);
  }
  void rmsnorm_backward_add(const Tensor& dy, const Tensor& x, const Tensor& weight,
                            const Tensor& rstd, const Tensor& add, Tensor& dx,
                            Tensor* dweight) override {
    cpu::rmsnorm_backward_add(dy, x, weight, rstd, &add, dx, dweight);
  }
  void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse) override {
    cpu::rope(x, positions, inv_freq, inverse);
  }
  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override {
    cpu::swiglu(gate, up, out);
  }
  void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate,
                       Tensor& dup) override {
    cpu::swiglu_backward(dout, gate, up, dgate, dup);
  }
  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override {
    cpu::embedding(table, ids, out);
  }
  void embedding_backward(const Tensor& dout, const Tensor& ids, Tensor& dtable) override {
    cpu::embedding_backward(dout, ids, dtable);
  }
  void cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& losses,
                     Tensor* dlogits, float grad_scale) override {
    cpu::cross_entropy(logits, targets, losses, dlogits, grad_scale);
  }
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
                 int64_t seq, float scale, Tensor& out, Tensor& lse) override {
    cpu::attention(q, k, v, doc_start, seq, scale, out, lse);
  }
  void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& out, const Tensor& lse, const Tensor& doc_start,
                          int64_t seq, float scale, Tensor& dq, Tensor& dk,
                          Tensor& dv) override {
    cpu::attention_backward(dout, q, k, v, out, lse, doc_start, seq, scale, dq, dk, dv);
  }
  void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
             const AdamWStep& s) override {
    cpu::adamw(param, grad, m, v, s);
  }
  double sum_squares(const Tensor& x) override { return cpu::sum_squares(x); }
  double grad_norm_clip(AdamWTensors& t, double max_norm, Tensor& grad_scale) override {
    return cpu::grad_norm_clip(t, max_norm, grad_scale);
  }
  void adamw_all(AdamWTensors& t, const Tensor* grad_scale, const AdamWStep& s) override {
    cpu::adamw_all(t, grad_scale, s);
  }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace loft::ops
