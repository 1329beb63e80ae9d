// CPU (float32) causal attention with grouped-query heads and document masking; see ops.h.
#pragma once
#include "engine/tensor/tensor.h"

namespace loft::ops::cpu {

void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
               int64_t seq, float scale, Tensor& out, Tensor& lse);
void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, const Tensor& lse, const Tensor& doc_start,
                        int64_t seq, float scale, Tensor& dq, Tensor& dk, Tensor& dv);

}  // namespace loft::ops::cpu
