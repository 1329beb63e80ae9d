// CUDA halves of engine/peft/falqon_ops (built only with the CUDA backend). Callers have
// validated dtypes, shapes and devices; results are bit-identical to the CPU references there.
#pragma once
#include "engine/peft/falqon_ops.h"

namespace loft::falqon::cuda {

void encode_e4m3(const Tensor& x, const Tensor& scale, Tensor& codes);
void split_columns(const Tensor& full, Tensor& head, Tensor& tail);
void row_scores(const Tensor& b, Tensor& scores);
// One block: a 4-pass radix select of the k-th largest score key, then an index-ordered
// compaction (block scans) of the keys above it and the lowest-index ties. No host round trip.
void select_topk(const Tensor& scores, Tensor& idx);
void apply_rows(RowUpdate& u, bool zero_all);

}  // namespace loft::falqon::cuda
