// The ops of KV-cache decoding (models/llama/decode.h), each with a float32 CPU reference
// (engine/ops/cpu/kv_cache_cpu.cpp) and a CUDA kernel (engine/ops/cuda/kv_cache_cuda.cu). They
// validate here and dispatch on the tensors' device, as engine/peft/falqon_ops.h does, so the op
// table of backend.h stays the training ops.
//
// A cache is one tensor per layer for K and one for V, [slots, max_len, Hkv, D] in the compute
// dtype (F32 on the CPU; F32 or BF16 on CUDA): slot s holds one sequence's keys (already rotated)
// and values at positions 0..len_s-1. Tokens of one call are ragged: token t belongs to slot
// slots[t] and sits at position pos[t] (I32 [T] each, on the tensors' device).
#pragma once
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft::ops {

// k_cache[slots[t], pos[t]] = k[t] and v_cache[slots[t], pos[t]] = v[t] for every token t with
// slots[t] >= 0 (a negative slot skips the token). k, v [T, Hkv, D]. The CPU checks every
// (slot, pos) against the cache's shape and names the token at fault; CUDA skips an out-of-range
// one (callers check on the host: models/llama/kv_cache.h).
void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, const Tensor& pos,
                    Tensor& k_cache, Tensor& v_cache);

// Causal attention of T new queries against their slots' cached keys and values:
//   out[t, h] = Σ_{j <= pos[t]} softmax_j(scale · q[t, h]·K[slots[t], j, h/G]) · V[slots[t], j, h/G]
// with G = Hq / Hkv (grouped-query heads). q, out [T, Hq, D]; the keys at positions <= pos[t]
// must already be in the cache (kv_cache_write first, for the new tokens). Softmax statistics and
// sums are fp32; the CPU reference does the arithmetic of ops::attention's CPU path in the same
// order, so a query equals what a full forward computes for it. One call mixes any slots and any
// number of queries per slot (decode: one each; a continuation after a cached prefix: several).
//
// `tiles` (optional, I32 [n, 4] on the tensors' device) describes the same tokens as runs: each
// row (first token, rows in 1..64, slot, position of the first row) says tokens first..first+rows-1
// are consecutive positions of one slot, and the rows cover every token once. With it, CUDA runs a
// flash kernel that reads each key once per run instead of once per query (bf16, head dim 64 or
// 128); the result is the same attention. make_query_tiles builds it from the host-side layout.
void cached_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      const Tensor& slots, const Tensor& pos, float scale, Tensor& out,
                      const Tensor* tiles = nullptr);

// Greedy decoding's choice for each row of logits x (F32 [R, V]): out[r] (I32 [R], x's device) =
// the lowest id among the row's largest values; NaN is never chosen unless the whole row is NaN
// (then 0). On the GPU only the R ids cross to the host, not the R × V logits.
void argmax_rows(const Tensor& x, Tensor& out);

// The tile rows for tokens given per run: run r has count[r] tokens from position start[r] of
// slot[r], packed in order; runs longer than 64 tokens split. Host vector of 4·n ints.
std::vector<int32_t> make_query_tiles(const std::vector<int32_t>& slot, const std::vector<int32_t>& start,
                                      const std::vector<int32_t>& count);

}  // namespace loft::ops
