// What fits a memory budget by the training estimate (memory_estimate.h): the longest sequence
// and the largest batch a method trains within `budget` bytes of device memory and, when
// opt.host_bytes is given, with what it pins within pinned_host_limit of the host. The estimate
// grows with both, so a binary search finds them. README's "what fits" table is made of these
// (tests/app/test_readme_fits.cpp).
#pragma once
#include <cstdint>

#include "engine/peft/method.h"
#include "models/llama/memory_estimate.h"

namespace loft::llama {

// The most tokens per sequence, a multiple of `step` up to `max_seq`, at opt.batch rows whose
// estimated peak is at most `budget`; 0 when not even `step` fits.
int64_t longest_seq_that_fits(const LlamaConfig& cfg, MemoryEstimateOptions opt,
                              const MethodOptions& method, int64_t budget, int64_t max_seq,
                              int64_t step = 1024);

// The most rows of opt.seq tokens (up to `max_batch`) whose estimated peak is at most `budget`;
// 0 when one row does not fit.
int64_t largest_batch_that_fits(const LlamaConfig& cfg, MemoryEstimateOptions opt,
                                const MethodOptions& method, int64_t budget, int64_t max_batch = 4096);

}  // namespace loft::llama
