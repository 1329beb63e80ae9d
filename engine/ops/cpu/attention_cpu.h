// The CPU attention with its work spread over `threads` host threads (0: every hardware thread;
// 1: this one): ops::attention and ops::attention_backward choose the count from the work's size.
// Every count gives the same bits.
#pragma once
#include "engine/tensor/tensor.h"

namespace loft::ops::cpu {

void attention_on_threads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
                          int64_t seq, float scale, Tensor& out, Tensor& lse, int threads);
void attention_backward_on_threads(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& out, const Tensor& lse, const Tensor& doc_start,
                                   int64_t seq, float scale, Tensor& dq, Tensor& dk, Tensor& dv,
                                   int threads);

}  // namespace loft::ops::cpu
