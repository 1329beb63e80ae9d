// The CUDA KV-cache kernels beyond the op table's rows (cuda::kv_cache_write, cached_attention and
// argmax_rows, engine/ops/cuda/kv_cache_cuda.cu; semantics: op_list.def). kv_cache_write: one
// block per token copies its K and V rows into the cache, skipping a token whose (slot, pos) lies
// outside it. cached_attention: one block of 4 warps per (query head, token), each warp walking
// every 4th cached key with an online softmax, the warps merging their partial (max, sum,
// accumulator) in shared memory; memory-bound at decode. With `tiles` and bf16 head dim 64/128:
// the flash kernel of attention_flash_forward.cu instead, which reads a run's keys once for its
// up-to-64 queries; without tiles, bf16 head dim 64/128 with up to 8 query heads per KV head: the
// decode kernel below. argmax_rows: one block per row, a tree of (value, id) under one total order
// (non-NaN over NaN, larger value, lower id), so the result is the CPU's sequential argmax.
#pragma once
#include "engine/ops/ops.h"

namespace loft::ops::cuda {

// The decode kernel (decode_attention.cu): a block of 4 warps per (token, KV head, split of at
// most 512 keys) for all the KV head's query heads, cache rows loaded straight into registers.
// Same semantics as cached_attention.
bool decode_attention_supports(const Tensor& q, const Tensor& k_cache);
void decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& slots,
                      const Tensor& pos, float scale, Tensor& out);

}  // namespace loft::ops::cuda
