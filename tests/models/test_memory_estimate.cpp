// The memory estimate against numbers worked out by hand (Llama-2-7B, stories260K).
#include <gtest/gtest.h>

#include "models/llama/memory_estimate.h"
#include "tests/common/test_util.h"

namespace loft::llama {
namespace {

LlamaConfig llama2_7b() {
  return LlamaConfig::from_json_text(R"({"hidden_size": 4096, "intermediate_size": 11008,
    "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000})",
                                     "llama2-7b");
}

const MethodMemory& find(const std::vector<MethodMemory>& ms, const std::string& name) {
  for (const auto& m : ms)
    if (m.method == name) return m;
  throw Error("no method " + name);
}

TEST(MemoryEstimate, Llama2_7BByHand) {
  const auto ms = estimate_training_memory(llama2_7b(), {.batch = 1, .seq = 512, .lora_rank = 64});
  ASSERT_EQ(ms.size(), 9u);
  // 4·4096² + 3·4096·11008 per layer, 32 layers.
  const int64_t P = 6'476'005'376;
  const int64_t norms = 2 * 65 * 4096;
  // r = 64 on all 7 projections: PEFT reports 159,907,840 trainable parameters for this model.
  const auto& lora = find(ms, "lora-bf16");
  EXPECT_EQ(lora.adapter_params, 159'907'840);
  EXPECT_EQ(lora.adapter, 16 * 159'907'840LL);
  EXPECT_EQ(lora.frozen_weights, 2 * P + norms);
  EXPECT_EQ(lora.embeddings, 2 * 2 * 32000 * 4096LL);

  // HOT (dense backbone): bf16 W + INT8-carrier codes of W (Llama widths need no padding) + a
  // 4-byte step per in-channel: 6 projections with in = 4096, down_proj with in = 11008.
  EXPECT_EQ(find(ms, "hot-dense").frozen_weights, 3 * P + 32 * 4 * (6 * 4096 + 11008) + norms);
  EXPECT_EQ(find(ms, "hot-dense").adapter_params, 159'907'840);

  const auto& qlora = find(ms, "qlora-nf4");
  EXPECT_NEAR(double(qlora.frozen_weights - norms), P * 4.127 / 8, P * 4.127 / 8 * 1e-4);
  EXPECT_EQ(qlora.adapter_params, lora.adapter_params);

  // FALQON: [W; A] in E4M3, A = r·Σin, + one transpose scratch as large as the largest
  // projection (gate/up/down: 11008·4096 bytes); B = r·Σout trains.
  const int64_t scratch = 11008 * 4096LL;
  const auto& falqon = find(ms, "falqon-fp8");
  EXPECT_EQ(falqon.frozen_weights, P + 64 * 35584 * 32LL + scratch + norms);
  EXPECT_EQ(falqon.adapter_params, 64 * 42496 * 32LL);

  for (const char* halo : {"halo-fp8", "halo-int8"})
    EXPECT_EQ(find(ms, halo).frozen_weights, P + scratch + norms) << halo;
  EXPECT_EQ(find(ms, "hot-fp8").frozen_weights,
            find(ms, "hot-dense").frozen_weights - P + scratch) << "bf16 W -> E4M3 W + scratch";
  EXPECT_EQ(find(ms, "halo-nf4").frozen_weights,
            qlora.frozen_weights + 2 * (4 * 4096 * 4096LL + 3 * 4096 * 11008LL));

  for (const auto& m : ms) {
    EXPECT_EQ(m.activations, lora.activations) << m.method;
    EXPECT_EQ(m.total(), m.frozen_weights + m.embeddings + m.adapter + m.activations + m.logits);
  }
  // One 512-token chunk of logits: bf16 + fp32.
  EXPECT_EQ(lora.logits, 512 * 32000 * 6LL);
}

TEST(MemoryEstimate, Nf4Layout) {
  EXPECT_EQ(nf4_dq_bytes(64), 32 + 1 + 4 + 4);
  EXPECT_EQ(nf4_dq_bytes(65), 33 + 2 + 4 + 4);
  EXPECT_EQ(nf4_dq_bytes(64 * 256 * 2), 16384 + 512 + 8 + 4);
}

TEST(MemoryEstimate, ActivationsByHand) {
  const auto c = load_llama_config(test::data_dir() / "models/stories260K-hf");
  // bf16: 4·64 + 2·64 + 2·32 + 3·172 + 7·8 = 1020 values; fp32: 2 + 8 heads.
  EXPECT_EQ(activation_bytes_per_token_layer(c, 8), 2 * 1020 + 4 * 10);
  const auto one = estimate_training_memory(c, {.batch = 2, .seq = 64, .lora_rank = 8});
  const auto two = estimate_training_memory(c, {.batch = 4, .seq = 64, .lora_rank = 8});
  EXPECT_EQ(one[0].activations, 128 * (5 * 2080 + 2 * 2 * 64));
  EXPECT_EQ(two[0].activations, 2 * one[0].activations);
  EXPECT_EQ(one[0].embeddings, 2 * 512 * 64);  // tied: one matrix
  EXPECT_EQ(one[0].logits, 128 * 512 * 6);
  // The logits chunk stops growing at 1024 tokens.
  const auto big = estimate_training_memory(c, {.batch = 16, .seq = 512, .lora_rank = 8});
  EXPECT_EQ(big[0].logits, 1024 * 512 * 6);
  EXPECT_THROW(estimate_training_memory(c, {.batch = 0}), Error);
  EXPECT_THROW(estimate_training_memory(c, {.batch = int64_t(1) << 40, .seq = int64_t(1) << 30}),
               UsageError);
}

}  // namespace
}  // namespace loft::llama
