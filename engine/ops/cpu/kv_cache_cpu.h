// CPU (float32) KV-cache ops; semantics in engine/ops/kv_cache_ops.h.
#pragma once
#include "engine/tensor/tensor.h"

namespace loft::ops::cpu {

void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, const Tensor& pos,
                    Tensor& k_cache, Tensor& v_cache);
void cached_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      const Tensor& slots, const Tensor& pos, float scale, Tensor& out);
// The argmax of one row (the reference of argmax_rows; sampling's greedy choice on the host).
int32_t argmax(const float* row, int64_t n);
void argmax_rows(const Tensor& x, Tensor& out);

}  // namespace loft::ops::cpu
