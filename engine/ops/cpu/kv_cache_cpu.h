// CPU (float32) KV-cache ops; semantics in engine/ops/kv_cache_ops.h.
#pragma once
#include "engine/tensor/tensor.h"

namespace loft::ops::cpu {

void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, const Tensor& pos,
                    Tensor& k_cache, Tensor& v_cache);
void cached_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      const Tensor& slots, const Tensor& pos, float scale, Tensor& out);

}  // namespace loft::ops::cpu
