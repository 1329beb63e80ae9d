// Token tiles on CUDA (LlamaModel::set_token_tile, models/llama/block.cpp): cuBLAS picks its
// kernels by shape, so a tile's products are not the whole's bit for bit; tiling must move a
// checkpointed step no further than splitting the same batch into one micro-batch per row does
// (which changes the products' shapes, and FP8 methods' per-tensor scales, the same way), for
// every method. The CPU test (tests/models/test_token_tiles.cpp) holds the bit-for-bit case.
#include <cstdio>

#include "engine/ops/ops.h"
#include "engine/peft/method.h"
#include "tests/common/tiled_step.h"
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

TEST(TokenTilesCuda, TiledStepWithinWhatMicroBatchesMove) {
  LOFT_REQUIRE_GPU();
  for (const std::string& method : method_names()) {
    SCOPED_TRACE(method);
    const TiledStep whole = tiled_step(method, 0, kGpu), tiled = tiled_step(method, ops::kGemmRowBlock, kGpu),
                    split = tiled_step(method, 0, kGpu, /*split_rows=*/true);
    const double tiled_off = worst_gradient_off(tiled, whole), split_off = worst_gradient_off(split, whole);
    std::printf("%s: loss untiled %.9g, tiled %.9g, one micro-batch per row %.9g; worst gradient "
                "off untiled: tiled %.3g, micro-batches %.3g\n",
                method.c_str(), whole.loss, tiled.loss, split.loss, tiled_off, split_off);
    EXPECT_NEAR(tiled.loss, whole.loss, 1e-3 * whole.loss);
    EXPECT_LE(tiled_off, 1.5 * split_off + 1e-6);
  }
}

}  // namespace
}  // namespace loft::test
