// A two-layer Llama small enough for exact CPU comparisons of whole training steps (grouped-query
// heads, a 300-token vocabulary): tests that compare two ways of taking the same step.
#pragma once
#include "models/llama/config.h"

namespace loft::test {

llama::LlamaConfig tiny_llama_config();

}  // namespace loft::test
