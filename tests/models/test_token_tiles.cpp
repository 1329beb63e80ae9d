// Token tiles (LlamaModel::set_token_tile): with checkpointing, a block's norms, projections and MLP
// run over tiles of tokens and only the attention sees every token at once. On the CPU that must
// change nothing for a method whose numerics are per token: one checkpointed step over three tiles
// gives the untiled step's loss and every adapter gradient bit for bit, and so does a forward (the
// CPU GEMM walks rows in the blocks the tiles are made of, engine/ops/cpu/gemm_cpu.cpp). Methods
// that quantize a whole tensor with one scale (FALQON, HALO's activations) or draw HOT's
// stochastic rounding by position take those per tile instead, exactly as splitting the batch
// into micro-batches already takes them per micro-batch: tiling must move their step no further
// than that does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "engine/ops/ops.h"
#include "engine/peft/method.h"
#include "models/llama/bench_model.h"
#include "models/llama/model.h"
#include "tests/common/tiled_step.h"
#include "tests/common/tiny_llama.h"

namespace loft::llama {
namespace {

bool per_token(const std::string& method) { return method == "lora" || method == "qlora"; }

TEST(TokenTiles, CheckpointedStepAndForwardEqualUntiled) {
  const Device cpu = Device::cpu();
  for (const std::string& method : method_names()) {
    SCOPED_TRACE(method);
    const test::TiledStep whole = test::tiled_step(method, 0, cpu, false, true),
                          tiled = test::tiled_step(method, ops::kGemmRowBlock, cpu, false, true);
    ASSERT_EQ(tiled.grads.size(), whole.grads.size());
    ASSERT_FALSE(whole.grads.empty());
    if (per_token(method)) {
      EXPECT_EQ(tiled.loss, whole.loss);
      EXPECT_EQ(tiled.logits, whole.logits);
      for (size_t i = 0; i < whole.grads.size(); ++i) EXPECT_EQ(tiled.grads[i], whole.grads[i]) << i;
      continue;
    }
    const test::TiledStep split = test::tiled_step(method, 0, cpu, /*split_rows=*/true);
    const double tiled_off = test::worst_gradient_off(tiled, whole),
                 split_off = test::worst_gradient_off(split, whole);
    std::printf("%s: loss untiled %.9g, tiled %.9g, one micro-batch per row %.9g; worst gradient "
                "off untiled: tiled %.3g, micro-batches %.3g\n",
                method.c_str(), whole.loss, tiled.loss, split.loss, tiled_off, split_off);
    // The loss is one sum over 2,448 tokens, where rounding differences average out: measured
    // up to 2.4e-5 relative.
    EXPECT_NEAR(tiled.loss, whole.loss, 1e-4 * whole.loss);
    EXPECT_LE(tiled_off, 1.5 * split_off);  // measured 0.97 to 1.18 times
  }
}

TEST(TokenTiles, TileIsAMultipleOfTheGemmRowBlock) {
  const LlamaConfig c = test::tiny_llama_config();
  MethodOptions m{"lora", {8, 16.0f}, parse_lora_targets("all"), 0};
  apply_method_invariants(m);
  std::mt19937_64 rng(1);
  LlamaModel model(c, random_llama_weights(c, DType::F32, Device::cpu(), 3), make_linear_factory(m, rng));
  EXPECT_EQ(model.token_tile(), kDefaultTokenTile);
  EXPECT_THROW(model.set_token_tile(100), Error);
  EXPECT_THROW(model.set_token_tile(-ops::kGemmRowBlock), Error);
  model.set_token_tile(0);
  EXPECT_EQ(model.token_tile(), 0);
  model.set_token_tile(2 * ops::kGemmRowBlock);
  EXPECT_EQ(model.token_tile(), 2 * ops::kGemmRowBlock);
}

}  // namespace
}  // namespace loft::llama
