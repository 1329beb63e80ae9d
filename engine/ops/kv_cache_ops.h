// The ops of KV-cache decoding (models/llama/decode.h): kv_cache_write, cached_attention and
// argmax_rows, rows of op_list.def like every op, validated in kv_cache_ops.cpp, with a float32
// CPU reference (engine/ops/cpu/kv_cache_cpu.cpp) and CUDA kernels (engine/ops/cuda/).
//
// A cache is one tensor per layer for K and one for V, [slots, max_len, Hkv, D] in the compute
// dtype (F32 on the CPU; F32 or BF16 on CUDA): slot s holds one sequence's keys (already rotated)
// and values at positions 0..len_s-1. Tokens of one call are ragged: token t belongs to slot
// slots[t] and sits at position pos[t] (I32 [T] each, on the tensors' device).
#pragma once
#include <vector>

#include "engine/ops/ops.h"

namespace loft::ops {

// The tile rows of cached_attention for tokens given per run: run r has count[r] tokens from
// position start[r] of slot[r], packed in order; runs longer than 64 tokens split. Host vector of
// 4·n ints.
std::vector<int32_t> make_query_tiles(const std::vector<int32_t>& slot, const std::vector<int32_t>& start,
                                      const std::vector<int32_t>& count);

}  // namespace loft::ops
