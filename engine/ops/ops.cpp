// The checks of every op of op_list.def but the KV-cache ones (kv_cache_ops.cpp), then the
// dispatch to its device. The CPU and CUDA implementations trust what passes here.
#include "engine/ops/ops.h"

#include <cmath>

#include "engine/ops/dispatch.h"

namespace loft::ops {

void dispatch::no_cuda(const char* op) {
  throw Error(cat(op, ": this loft was built without the CUDA backend; use --device cpu"));
}

namespace {

void same_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Device d = (*ts.begin())->device();
  for (const Tensor* t : ts) {
    LOFT_CHECK(t->defined(), op, ": undefined tensor argument");
    LOFT_CHECK(t->device() == d, op, ": tensors on different devices (", d.str(), " and ",
               t->device().str(), ")");
  }
}

bool activation_dtype_ok(const Tensor& t) {
  if (t.device().is_cpu()) return t.dtype() == DType::F32;
  return t.dtype() == DType::F32 || t.dtype() == DType::BF16;
}

void need_activation(const char* op, const char* name, const Tensor& t) {
  LOFT_CHECK(activation_dtype_ok(t), op, ": ", name, " has dtype ", dtype_name(t.dtype()), " on ",
             t.device().str(), " (F32", t.device().is_cuda() ? " or BF16" : "", " expected)");
}

void need_shape(const char* op, const char* name, const Tensor& t, const Shape& s) {
  LOFT_CHECK(t.shape() == s, op, ": ", name, " is ", shape_str(t.shape()), ", expected ",
             shape_str(s));
}

void need_dtype(const char* op, const char* name, const Tensor& t, DType d) {
  LOFT_CHECK(t.dtype() == d, op, ": ", name, " has dtype ", dtype_name(t.dtype()), ", expected ",
             dtype_name(d));
}

// An op's optional amax output (op_list.def): F32 [1] on the output's device.
void need_amax(const char* op, const char* name, const Tensor& out, const Tensor* amax) {
  if (!amax) return;
  same_device(op, {&out, amax});
  need_shape(op, name, *amax, {1});
  need_dtype(op, name, *amax, DType::F32);
}

// Views x as [rows, last_dim].
int64_t rows_of(const Tensor& t) { return t.dim() == 0 ? 1 : t.numel() / std::max<int64_t>(t.size(-1), 1); }

}  // namespace

void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmOptions& opt) {
  same_device("gemm", {&a, &b, &c});
  LOFT_CHECK(a.dim() == 2 && b.dim() == 2 && c.dim() == 2, "gemm: 2-D tensors expected, got ",
             a.str(), ", ", b.str(), ", ", c.str());
  const int64_t m = opt.trans_a ? a.size(1) : a.size(0);
  const int64_t k = opt.trans_a ? a.size(0) : a.size(1);
  const int64_t kb = opt.trans_b ? b.size(1) : b.size(0);
  const int64_t n = opt.trans_b ? b.size(0) : b.size(1);
  LOFT_CHECK(k == kb, "gemm: inner dimensions differ: op(A) is [", m, ", ", k, "], op(B) is [", kb,
             ", ", n, "]");
  need_shape("gemm", "C", c, {m, n});
  LOFT_CHECK(a.dtype() == b.dtype(), "gemm: A is ", dtype_name(a.dtype()), " but B is ",
             dtype_name(b.dtype()));
  need_activation("gemm", "A", a);
  need_activation("gemm", "C", c);
  LOFT_CHECK(a.dtype() == c.dtype() || (a.dtype() == DType::BF16 && c.dtype() == DType::F32),
             "gemm: unsupported dtypes ", dtype_name(a.dtype()), " x ", dtype_name(b.dtype()),
             " -> ", dtype_name(c.dtype()));
  // The profiler's op breakdown names each GEMM by its shape (M×N×K, ta/tb: A/B transposed, +C:
  // beta adds C), to set beside bench kernels' and scripts/dev/cublaslt_algos.cu's figures.
  prof::OpScope shaped(prof::label([&] {
    return cat("gemm ", m, "x", n, "x", k, opt.trans_a ? " ta" : "", opt.trans_b ? " tb" : "",
               opt.beta != 0.0f ? " +C" : "");
  }));
  dispatch::gemm(c.device(), a, b, c, opt);
}

void add_bias(Tensor& y, const Tensor& bias) {
  same_device("add_bias", {&y, &bias});
  need_activation("add_bias", "y", y);
  need_activation("add_bias", "bias", bias);
  LOFT_CHECK(y.dim() == 2, "add_bias: y must be [rows, D], got ", y.str());
  need_shape("add_bias", "bias", bias, {y.size(1)});
  dispatch::add_bias(y.device(), y, bias);
}

void convert(const Tensor& src, Tensor& dst) {
  same_device("convert", {&src, &dst});
  LOFT_CHECK(src.numel() == dst.numel(), "convert: ", src.str(), " into ", dst.str());
  for (const Tensor* t : std::initializer_list<const Tensor*>{&src, &dst})
    LOFT_CHECK(t->dtype() == DType::F32 || t->dtype() == DType::BF16 || t->dtype() == DType::F16,
               "convert: unsupported dtype ", dtype_name(t->dtype()));
  dispatch::convert(dst.device(), src, dst);
}

void axpy(float alpha, const Tensor& x, Tensor& y) {
  same_device("axpy", {&x, &y});
  need_activation("axpy", "y", y);
  need_shape("axpy", "x", x, y.shape());
  need_dtype("axpy", "x", x, y.dtype());
  dispatch::axpy(y.device(), alpha, x, y);
}

void scale(Tensor& x, float alpha) {
  same_device("scale", {&x});
  need_activation("scale", "x", x);
  dispatch::scale(x.device(), x, alpha);
}

void fill_random(Tensor& x, uint64_t seed, float std) {
  same_device("fill_random", {&x});
  need_activation("fill_random", "x", x);
  LOFT_CHECK(std::isfinite(std) && std >= 0.0f, "fill_random: std must be finite and >= 0, got ",
             std);
  dispatch::fill_random(x.device(), x, seed, std);
}

namespace {

// The checks rmsnorm and add_rmsnorm share; `op` names the caller in errors.
void check_rmsnorm(const char* op, const Tensor& x, const Tensor& weight, const Tensor& y,
                   const Tensor* rstd) {
  same_device(op, {&x, &weight, &y});
  need_activation(op, "x", x);
  need_activation(op, "weight", weight);
  need_shape(op, "weight", weight, {x.size(-1)});
  need_shape(op, "y", y, x.shape());
  need_dtype(op, "y", y, x.dtype());
  if (rstd) {
    same_device(op, {&x, rstd});
    need_shape(op, "rstd", *rstd, {rows_of(x)});
    need_dtype(op, "rstd", *rstd, DType::F32);
  }
}

// The checks rmsnorm_backward and rmsnorm_backward_add share.
void check_rmsnorm_backward(const char* op, const Tensor& dy, const Tensor& x,
                            const Tensor& weight, const Tensor& rstd, const Tensor& dx,
                            const Tensor* dweight) {
  same_device(op, {&dy, &x, &weight, &rstd, &dx});
  need_activation(op, "x", x);
  need_activation(op, "weight", weight);
  need_shape(op, "weight", weight, {x.size(-1)});
  need_shape(op, "dy", dy, x.shape());
  need_shape(op, "dx", dx, x.shape());
  need_dtype(op, "dy", dy, x.dtype());
  need_dtype(op, "dx", dx, x.dtype());
  need_shape(op, "rstd", rstd, {rows_of(x)});
  need_dtype(op, "rstd", rstd, DType::F32);
  if (dweight) {
    same_device(op, {&x, dweight});
    need_shape(op, "dweight", *dweight, {x.size(-1)});
    need_dtype(op, "dweight", *dweight, DType::F32);
  }
}

}  // namespace

void rmsnorm(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor* rstd,
             Tensor* y_amax) {
  check_rmsnorm("rmsnorm", x, weight, y, rstd);
  need_amax("rmsnorm", "y_amax", y, y_amax);
  dispatch::rmsnorm(x.device(), x, weight, eps, y, rstd, y_amax);
}

void add_rmsnorm(const Tensor& residual, Tensor& x, const Tensor& weight, float eps, Tensor& y,
                 Tensor* rstd, Tensor* y_amax) {
  check_rmsnorm("add_rmsnorm", x, weight, y, rstd);
  same_device("add_rmsnorm", {&x, &residual});
  need_shape("add_rmsnorm", "residual", residual, x.shape());
  need_dtype("add_rmsnorm", "residual", residual, x.dtype());
  need_amax("add_rmsnorm", "y_amax", y, y_amax);
  dispatch::add_rmsnorm(x.device(), residual, x, weight, eps, y, rstd, y_amax);
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      Tensor& dx, Tensor* dweight) {
  check_rmsnorm_backward("rmsnorm_backward", dy, x, weight, rstd, dx, dweight);
  dispatch::rmsnorm_backward(x.device(), dy, x, weight, rstd, dx, dweight);
}

void rmsnorm_backward_add(const Tensor& dy, const Tensor& x, const Tensor& weight,
                          const Tensor& rstd, const Tensor& add, Tensor& dx, Tensor* dweight,
                          Tensor* dx_amax) {
  check_rmsnorm_backward("rmsnorm_backward_add", dy, x, weight, rstd, dx, dweight);
  same_device("rmsnorm_backward_add", {&x, &add});
  need_shape("rmsnorm_backward_add", "add", add, x.shape());
  need_dtype("rmsnorm_backward_add", "add", add, x.dtype());
  need_amax("rmsnorm_backward_add", "dx_amax", dx, dx_amax);
  dispatch::rmsnorm_backward_add(x.device(), dy, x, weight, rstd, add, dx, dweight, dx_amax);
}

namespace {
// What every rotation checks (rope, head_norm_rope and its backward): x [tokens, heads, head_dim]
// with an even head_dim, a position per token and a frequency per pair.
void check_rope(const char* op, const Tensor& x, const Tensor& positions, const Tensor& inv_freq) {
  same_device(op, {&x, &positions, &inv_freq});
  need_activation(op, "x", x);
  LOFT_CHECK(x.dim() == 3, op, ": x must be [tokens, heads, head_dim], got ", x.str());
  LOFT_CHECK(x.size(2) % 2 == 0, op, ": head_dim ", x.size(2), " is odd");
  need_shape(op, "positions", positions, {x.size(0)});
  need_dtype(op, "positions", positions, DType::I32);
  need_shape(op, "inv_freq", inv_freq, {x.size(2) / 2});
  need_dtype(op, "inv_freq", inv_freq, DType::F32);
}

// head_norm_rope and its backward: the rotation's checks and the per-head norm weight.
void check_head_norm_rope(const char* op, const Tensor& x, const Tensor& weight,
                          const Tensor& positions, const Tensor& inv_freq) {
  check_rope(op, x, positions, inv_freq);
  same_device(op, {&x, &weight});
  need_activation(op, "weight", weight);
  need_shape(op, "weight", weight, {x.size(2)});
}
}  // namespace

void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse,
          Tensor* x_amax) {
  check_rope("rope", x, positions, inv_freq);
  need_amax("rope", "x_amax", x, x_amax);
  dispatch::rope(x.device(), x, positions, inv_freq, inverse, x_amax);
}

void head_norm_rope(const Tensor& x, const Tensor& weight, float eps, const Tensor& positions,
                    const Tensor& inv_freq, Tensor& y, Tensor* rstd) {
  check_head_norm_rope("head_norm_rope", x, weight, positions, inv_freq);
  same_device("head_norm_rope", {&x, &y});
  need_shape("head_norm_rope", "y", y, x.shape());
  need_dtype("head_norm_rope", "y", y, x.dtype());
  if (rstd) {
    same_device("head_norm_rope", {&x, rstd});
    need_shape("head_norm_rope", "rstd", *rstd, {x.size(0) * x.size(1)});
    need_dtype("head_norm_rope", "rstd", *rstd, DType::F32);
  }
  dispatch::head_norm_rope(x.device(), x, weight, eps, positions, inv_freq, y, rstd);
}

void head_norm_rope_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                             const Tensor& rstd, const Tensor& positions, const Tensor& inv_freq,
                             Tensor& dx, Tensor* dx_amax) {
  const char* op = "head_norm_rope_backward";
  check_head_norm_rope(op, x, weight, positions, inv_freq);
  same_device(op, {&x, &dy, &rstd, &dx});
  need_shape(op, "dy", dy, x.shape());
  need_shape(op, "dx", dx, x.shape());
  need_dtype(op, "dy", dy, x.dtype());
  need_dtype(op, "dx", dx, x.dtype());
  need_shape(op, "rstd", rstd, {x.size(0) * x.size(1)});
  need_dtype(op, "rstd", rstd, DType::F32);
  need_amax(op, "dx_amax", dx, dx_amax);
  dispatch::head_norm_rope_backward(x.device(), dy, x, weight, rstd, positions, inv_freq, dx, dx_amax);
}

void swiglu(const Tensor& gate, const Tensor& up, Tensor& out, Tensor* out_amax) {
  same_device("swiglu", {&gate, &up, &out});
  need_activation("swiglu", "gate", gate);
  need_shape("swiglu", "up", up, gate.shape());
  need_shape("swiglu", "out", out, gate.shape());
  need_dtype("swiglu", "up", up, gate.dtype());
  need_dtype("swiglu", "out", out, gate.dtype());
  need_amax("swiglu", "out_amax", out, out_amax);
  dispatch::swiglu(gate.device(), gate, up, out, out_amax);
}

void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate,
                     Tensor& dup, Tensor* dgate_amax, Tensor* dup_amax) {
  same_device("swiglu_backward", {&dout, &gate, &up, &dgate, &dup});
  need_activation("swiglu_backward", "gate", gate);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dout, &up, &dgate, &dup}) {
    need_shape("swiglu_backward", "argument", *t, gate.shape());
    need_dtype("swiglu_backward", "argument", *t, gate.dtype());
  }
  need_amax("swiglu_backward", "dgate_amax", dgate, dgate_amax);
  need_amax("swiglu_backward", "dup_amax", dup, dup_amax);
  dispatch::swiglu_backward(gate.device(), dout, gate, up, dgate, dup, dgate_amax, dup_amax);
}

void embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  same_device("embedding", {&table, &ids, &out});
  LOFT_CHECK(table.dim() == 2, "embedding: table must be [vocab, dim], got ", table.str());
  // A lookup copies rows: a BF16 table is fine on the CPU too (a CUDA model's host-side table);
  // out takes the table's dtype.
  LOFT_CHECK(table.dtype() == DType::F32 || table.dtype() == DType::BF16, "embedding: table has dtype ",
             dtype_name(table.dtype()), " (F32 or BF16 expected)");
  LOFT_CHECK(ids.dim() == 1, "embedding: ids must be 1-D, got ", ids.str());
  need_dtype("embedding", "ids", ids, DType::I32);
  need_shape("embedding", "out", out, {ids.size(0), table.size(1)});
  need_dtype("embedding", "out", out, table.dtype());
  dispatch::embedding(table.device(), table, ids, out);
}

void embedding_backward(const Tensor& dout, const Tensor& ids, Tensor& dtable) {
  same_device("embedding_backward", {&dout, &ids, &dtable});
  LOFT_CHECK(dtable.dim() == 2, "embedding_backward: dtable must be 2-D, got ", dtable.str());
  need_dtype("embedding_backward", "dtable", dtable, DType::F32);
  need_dtype("embedding_backward", "ids", ids, DType::I32);
  LOFT_CHECK(ids.dim() == 1, "embedding_backward: ids must be 1-D, got ", ids.str());
  need_shape("embedding_backward", "dout", dout, {ids.size(0), dtable.size(1)});
  need_activation("embedding_backward", "dout", dout);
  dispatch::embedding_backward(dout.device(), dout, ids, dtable);
}

void cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& losses, Tensor* dlogits,
                   float grad_scale) {
  same_device("cross_entropy", {&logits, &targets, &losses});
  LOFT_CHECK(logits.dim() == 2, "cross_entropy: logits must be [tokens, vocab], got ",
             logits.str());
  need_activation("cross_entropy", "logits", logits);
  need_shape("cross_entropy", "targets", targets, {logits.size(0)});
  need_dtype("cross_entropy", "targets", targets, DType::I32);
  need_shape("cross_entropy", "losses", losses, {logits.size(0)});
  need_dtype("cross_entropy", "losses", losses, DType::F32);
  if (dlogits) {
    same_device("cross_entropy", {&logits, dlogits});
    need_shape("cross_entropy", "dlogits", *dlogits, logits.shape());
    if (!(logits.dtype() == DType::F32 && dlogits->dtype() == DType::BF16))
      need_dtype("cross_entropy", "dlogits", *dlogits, logits.dtype());
  }
  dispatch::cross_entropy(logits.device(), logits, targets, losses, dlogits, grad_scale);
}

namespace {
void check_attention_args(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& doc_start, int64_t seq) {
  same_device(op, {&q, &k, &v, &doc_start});
  need_activation(op, "q", q);
  LOFT_CHECK(q.dim() == 3 && k.dim() == 3, op, ": q and k must be [tokens, heads, head_dim], got ",
             q.str(), ", ", k.str());
  need_shape(op, "v", v, k.shape());
  need_dtype(op, "k", k, q.dtype());
  need_dtype(op, "v", v, q.dtype());
  LOFT_CHECK(k.size(0) == q.size(0) && k.size(2) == q.size(2), op, ": k ", k.str(),
             " does not match q ", q.str());
  LOFT_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, op, ": ", q.size(1),
             " query heads are not a multiple of ", k.size(1), " kv heads");
  LOFT_CHECK(seq > 0 && q.size(0) % seq == 0, op, ": ", q.size(0),
             " tokens are not a whole number of rows of ", seq);
  need_shape(op, "doc_start", doc_start, {q.size(0)});
  need_dtype(op, "doc_start", doc_start, DType::I32);
}
}  // namespace

void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
               int64_t seq, float scale, Tensor& out, Tensor& lse) {
  check_attention_args("attention", q, k, v, doc_start, seq);
  same_device("attention", {&q, &out, &lse});
  need_shape("attention", "out", out, q.shape());
  need_dtype("attention", "out", out, q.dtype());
  need_shape("attention", "lse", lse, {q.size(0), q.size(1)});
  need_dtype("attention", "lse", lse, DType::F32);
  dispatch::attention(q.device(), q, k, v, doc_start, seq, scale, out, lse);
}

void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, const Tensor& lse, const Tensor& doc_start,
                        int64_t seq, float scale, Tensor& dq, Tensor& dk, Tensor& dv) {
  const char* op = "attention_backward";
  check_attention_args(op, q, k, v, doc_start, seq);
  same_device(op, {&q, &dout, &out, &lse, &dq, &dk, &dv});
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dout, &out, &dq}) {
    need_shape(op, "dout/out/dq", *t, q.shape());
    need_dtype(op, "dout/out/dq", *t, q.dtype());
  }
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dk, &dv}) {
    need_shape(op, "dk/dv", *t, k.shape());
    need_dtype(op, "dk/dv", *t, q.dtype());
  }
  need_shape(op, "lse", lse, {q.size(0), q.size(1)});
  need_dtype(op, "lse", lse, DType::F32);
  dispatch::attention_backward(q.device(), dout, q, k, v, out, lse, doc_start, seq, scale, dq,
                                             dk, dv);
}

void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& s) {
  same_device("adamw", {&param, &grad, &m, &v});
  for (const Tensor* t : std::initializer_list<const Tensor*>{&param, &grad, &m, &v}) {
    need_dtype("adamw", "argument", *t, DType::F32);
    need_shape("adamw", "argument", *t, param.shape());
  }
  LOFT_CHECK(s.step >= 1, "adamw: step counts from 1, got ", s.step);
  dispatch::adamw(param.device(), param, grad, m, v, s);
}

double sum_squares(const Tensor& x) {
  same_device("sum_squares", {&x});
  need_dtype("sum_squares", "x", x, DType::F32);
  return dispatch::sum_squares(x.device(), x);
}

namespace {

// with_state: every list as long as params, every tensor F32 on params[0]'s device, the i-th of
// each of one shape. Else the grads alone: F32 on one device.
void check_adamw_tensors(const char* op, const AdamWTensors& t, bool with_state) {
  const size_t n = with_state ? t.params.size() : t.grads.size();
  LOFT_CHECK(t.grads.size() == n && (!with_state || (t.m.size() == n && t.v.size() == n)), op,
             ": ", t.params.size(), " params, ", t.grads.size(), " grads, ", t.m.size(), " m, ",
             t.v.size(), " v");
  LOFT_CHECK(t.copies.empty() || t.copies.size() == n, op, ": ", t.copies.size(), " copies for ", n,
             " params (none, or one per param)");
  for (size_t i = 0; i < n; ++i) {
    if (with_state) {
      same_device(op, {&t.params[0], &t.params[i], &t.grads[i], &t.m[i], &t.v[i]});
      for (const Tensor* x : {&t.params[i], &t.grads[i], &t.m[i], &t.v[i]}) {
        need_dtype(op, "argument", *x, DType::F32);
        need_shape(op, "argument", *x, t.params[i].shape());
      }
      if (i < t.copies.size() && t.copies[i].defined()) {
        const Tensor& c = t.copies[i];
        LOFT_CHECK(c.dtype() == DType::BF16 || c.dtype() == DType::F16, op, ": copy ", i, " is ",
                   c.str(), ", expected BF16 or F16");
        need_shape(op, "copy", c, t.params[i].shape());
        same_device(op, {&t.params[i], &c});
      }
    } else {
      same_device(op, {&t.grads[0], &t.grads[i]});
      need_dtype(op, "grad", t.grads[i], DType::F32);
    }
  }
}

}  // namespace

double grad_norm_clip(AdamWTensors& t, double max_norm, Tensor& grad_scale) {
  check_adamw_tensors("grad_norm_clip", t, !t.params.empty());  // the grads alone, or all four
  need_dtype("grad_norm_clip", "grad_scale", grad_scale, DType::F32);
  need_shape("grad_norm_clip", "grad_scale", grad_scale, {1});
  if (!t.grads.empty()) same_device("grad_norm_clip", {&t.grads[0], &grad_scale});
  return dispatch::grad_norm_clip(grad_scale.device(), t, max_norm, grad_scale);
}

void adamw_all(AdamWTensors& t, const Tensor* grad_scale, const AdamWStep& s) {
  check_adamw_tensors("adamw_all", t, true);
  LOFT_CHECK(s.step >= 1, "adamw_all: step counts from 1, got ", s.step);
  if (grad_scale) {
    need_dtype("adamw_all", "grad_scale", *grad_scale, DType::F32);
    need_shape("adamw_all", "grad_scale", *grad_scale, {1});
  }
  if (t.params.empty()) return;
  if (grad_scale) same_device("adamw_all", {&t.params[0], grad_scale});
  dispatch::adamw_all(t.params[0].device(), t, grad_scale, s);
}

double sum(const Tensor& x) {
  double s = 0;
  for (float v : x.to_float_vector()) s += v;
  return s;
}

}  // namespace loft::ops
