// A sliding attention window (LlamaConfig::sliding_window, Mistral's) expressed through the
// attention ops' doc_start (engine/ops/op_list.def: query at row-local position i attends key j iff
// doc_start[i] <= j <= i), so that no attention op needs a window of its own. transformers'
// convention (masking_utils.py, sliding_window_overlay on top of the causal mask): query i sees key
// j iff i − W < j <= i, i.e. the last W keys, itself included. So the window is
//   doc_start'[i] = max(doc_start[i], i − W + 1),
// still monotone within a row and within [0, i], which every attention path reads per query. This
// is the one place the transform is made (the model's batches and the decoder's prefill call it).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft::llama {

// In place over rows of `seq` tokens (doc_start.size() a multiple of seq); window 0: unchanged.
void apply_sliding_window(std::vector<int32_t>& doc_start, int64_t seq, int64_t window);
// The same for an I32 [T] tensor on any device (a round trip through the host: 4 bytes a token);
// returns `doc_start` itself where no row is longer than the window.
Tensor apply_sliding_window(const Tensor& doc_start, int64_t seq, int64_t window);

}  // namespace loft::llama
