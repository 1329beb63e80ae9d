// CUDA halves of engine/methods/falqon/falqon_ops (built only with the CUDA backend). Callers have
// validated dtypes, shapes and devices; results are bit-identical to the CPU references there.
#pragma once
#include "engine/methods/falqon/falqon_ops.h"

namespace loft::falqon::cuda {

void encode_e4m3(const Tensor& x, const Tensor& scale, Tensor& codes);
// Coalesced tiles of B in shared memory, one summing thread per row.
void row_scores(const Tensor& b, Tensor& scores);
// One block with the scores in shared memory (when they fit): a radix select of the k-th largest
// key (8 bits a pass, stopping once its bin is taken whole), then an index-ordered compaction.
void select_topk(const Tensor& scores, Tensor& idx);
// One kernel for the k rows' codes (and wt's k columns when given) and `applied`; then B's rows (accumulate)
// or all of B (reset) are zeroed. Nothing is copied to the host.
void apply_rows(RowUpdate& u, bool zero_all);
// The three above for many projections: one launch a phase (scores, select, update, zeroing), each
// block doing what the single launch's block does for its projection.
void after_steps(std::vector<AfterStep>& steps);

}  // namespace loft::falqon::cuda
