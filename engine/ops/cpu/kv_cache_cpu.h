// What the CPU's KV-cache ops share with the host-side sampler (the ops themselves are rows of
// engine/ops/op_list.def).
#pragma once
#include <cstdint>

namespace loft::ops::cpu {

// The argmax of one row (the reference of argmax_rows; sampling's greedy choice on the host).
int32_t argmax(const float* row, int64_t n);

}  // namespace loft::ops::cpu
