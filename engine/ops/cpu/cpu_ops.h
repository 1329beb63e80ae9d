// The float32 CPU implementations behind cpu_backend(), one family per file. ops.cpp has already
// validated shapes, dtypes and devices; semantics are those documented in engine/ops/ops.h.
#pragma once
#include "engine/ops/ops.h"

namespace loft::ops::cpu {

void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmOptions& opt);

void convert(const Tensor& src, Tensor& dst);
void axpy(float alpha, const Tensor& x, Tensor& y);
void scale(Tensor& x, float alpha);
void fill_random(Tensor& x, uint64_t seed, float std);

void rmsnorm(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor* rstd);
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      Tensor& dx, Tensor* dweight);
void add_rmsnorm(const Tensor& residual, Tensor& x, const Tensor& weight, float eps, Tensor& y,
                 Tensor* rstd);
// rmsnorm_backward with dx = the norm gradient + *add when add is given.
void rmsnorm_backward_add(const Tensor& dy, const Tensor& x, const Tensor& weight,
                          const Tensor& rstd, const Tensor* add, Tensor& dx, Tensor* dweight);

void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse);

void swiglu(const Tensor& gate, const Tensor& up, Tensor& out);
void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate,
                     Tensor& dup);

void embedding(const Tensor& table, const Tensor& ids, Tensor& out);
void embedding_backward(const Tensor& dout, const Tensor& ids, Tensor& dtable);

void cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& losses, Tensor* dlogits,
                   float grad_scale);

}  // namespace loft::ops::cpu
