// A two-layer Llama small enough for exact CPU comparisons of whole training steps (grouped-query
// heads, a 300-token vocabulary): tests that compare two ways of taking the same step.
#pragma once
#include "models/llama/model.h"

namespace loft::test {

llama::LlamaConfig tiny_llama_config();

// Every adapter param of `model` drawn from N(0, 0.02) (seed 9), then the compute copies
// refreshed: B starts at zero, and a non-zero one lets its term reach the output.
void randomize_adapters(llama::LlamaModel& model);

}  // namespace loft::test
