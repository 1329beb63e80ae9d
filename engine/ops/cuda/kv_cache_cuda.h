// CUDA KV-cache ops (semantics: engine/ops/kv_cache_ops.h; arguments validated there). Both run
// on cuda::stream of their tensors' device. F32 or BF16 (one dtype per call), fp32 arithmetic.
#pragma once
#include "engine/tensor/tensor.h"

namespace loft::ops::cuda_kv {

// One block per token copies its K and V rows into the cache; a token whose (slot, pos) lies
// outside the cache is skipped.
void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, const Tensor& pos,
                    Tensor& k_cache, Tensor& v_cache);
// One block of 4 warps per (query head, token): each warp walks every 4th cached key with an
// online softmax (lane l holds head_dim/32 contiguous elements), then the warps merge their
// partial (max, sum, accumulator) in shared memory. Memory-bound at decode (each step reads the
// cache once per query head; grouped heads re-read their KV head from L2). With `tiles` (runs of
// consecutive positions, kv_cache_ops.h) and bf16 head dim 64/128: the flash kernel of
// attention_flash_forward.cu instead, which reads a run's keys once for its up-to-64 queries.
// Without tiles, bf16 head dim 64/128 with up to 8 query heads per KV head: decode_attention.
void cached_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      const Tensor& slots, const Tensor& pos, float scale, Tensor& out,
                      const Tensor* tiles = nullptr);

// The decode kernel (decode_attention.cu): a block of 4 warps per (token, KV head, split of at
// most 512 keys) for all the KV head's query heads, cache rows loaded straight into registers.
// Same semantics as cached_attention.
// One block per row: each thread scans a stride, then a tree of (value, id) under one total order
// (non-NaN over NaN, larger value, lower id), so the result is the CPU's sequential argmax.
void argmax_rows(const Tensor& x, Tensor& out);

bool decode_attention_supports(const Tensor& q, const Tensor& k_cache);
void decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& slots,
                      const Tensor& pos, float scale, Tensor& out);

}  // namespace loft::ops::cuda_kv
