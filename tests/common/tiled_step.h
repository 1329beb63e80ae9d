// One training step of a small random Llama over 2 rows of 1224 tokens (two documents in the
// first row), untiled or in token tiles (LlamaModel::set_token_tile), for the token-tile tests on
// the CPU (tests/models/test_token_tiles.cpp) and on CUDA (tests/gpu/test_token_tiles_cuda.cpp).
#pragma once
#include <string>
#include <vector>

#include "engine/tensor/tensor.h"
#include "tests/common/close_runs.h"  // rel_l2

namespace loft::test {

struct TiledStep {
  double loss = 0;
  std::vector<std::vector<float>> grads;  // every Param's, in params() order
  std::vector<float> logits;              // a forward of the same batch (only when asked)
};

// With checkpointing; tile 0: untiled. split_rows: one micro-batch per row (the accumulated
// gradient of the same batch). logits: also a forward of the whole batch afterwards.
TiledStep tiled_step(const std::string& method, int64_t tile, Device device, bool split_rows = false,
                     bool logits = false);

// The largest rel_l2 over the params' gradients.
double worst_gradient_off(const TiledStep& a, const TiledStep& b);

}  // namespace loft::test
