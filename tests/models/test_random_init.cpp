// The bench shapes and random weights: every named shape's config and its tensor shapes (configs
// only: nothing of 7B size is allocated), known parameter counts, and the tiny shape built for
// real (dtype, norms of 1, the std 0.02 spread, reproducibility, a loss of about ln(vocab)).
#include <cmath>

#include "engine/peft/frozen_linear.h"
#include "models/llama/bench_model.h"
#include "models/llama/model.h"
#include "tests/common/test_util.h"

namespace loft::test {
namespace {

using llama::LlamaConfig;

struct Expected {
  const char* name;
  int64_t hidden, intermediate, layers, heads, kv_heads, vocab;
  int64_t parameters;  // as transformers counts the model (untied lm_head)
  double rope_theta = 10000.0;
  int64_t family_tensors_per_layer = 0;  // Qwen2.5's q/k/v biases, Qwen3's q/k norms
};
// The sizes of scripts/dev/peft_baseline.py. The counts are those of the published models
// (Llama-2-7B, Llama-2-13B, Llama-2-70B, Llama-3-8B, TinyLlama-1.1B); tiny by hand: embed + lm_head
// 2·512·64, final norm 64, per layer q 64·64, k and v 32·64, o 64·64, gate/up/down 172·64,
// norms 2·64 = 45,440, two layers. The cousins' counts are the published Qwen2.5-7B, Qwen3-8B and
// Mistral-7B-v0.3 checkpoints': every bias and q/k norm counted, nothing else.
const Expected kExpected[] = {
    {"llama-7b", 4096, 11008, 32, 32, 32, 32000, 6738415616},
    {"llama-13b", 5120, 13824, 40, 40, 40, 32000, 13015864320},
    {"llama-70b", 8192, 28672, 80, 64, 8, 32000, 68976648192},
    {"llama3-8b", 4096, 14336, 32, 32, 8, 128256, 8030261248},
    {"tinyllama-1.1b", 2048, 5632, 22, 32, 4, 32000, 1100048384},
    {"qwen2.5-7b", 3584, 18944, 28, 28, 4, 152064, 7615616512, 1e6, 3},
    {"qwen3-8b", 4096, 12288, 36, 32, 8, 151936, 8190735360, 1e6, 2},
    {"mistral-7b", 4096, 14336, 32, 32, 8, 32768, 7248023552, 1e6, 0},
    {"tiny", 64, 172, 2, 8, 4, 512, 2 * 512 * 64 + 64 + 2 * 45440},
};

TEST(BenchShapes, NamesAreExactlyTheKnownShapes) {
  std::vector<std::string> want;
  for (const Expected& e : kExpected) want.emplace_back(e.name);
  EXPECT_EQ(llama::bench_shape_names(), want);
  EXPECT_FALSE(llama::bench_shape_config("llama-65b").has_value());
  EXPECT_FALSE(llama::bench_shape_config("").has_value());
}

TEST(BenchShapes, ConfigsMatchTheBaselineAndCountParameters) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    const auto c = llama::bench_shape_config(e.name);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->hidden_size, e.hidden);
    EXPECT_EQ(c->intermediate_size, e.intermediate);
    EXPECT_EQ(c->num_layers, e.layers);
    EXPECT_EQ(c->num_heads, e.heads);
    EXPECT_EQ(c->num_kv_heads, e.kv_heads);
    EXPECT_EQ(c->vocab_size, e.vocab);
    EXPECT_EQ(c->head_dim * c->num_heads, e.hidden);
    EXPECT_FALSE(c->tie_word_embeddings);
    EXPECT_EQ(c->rope_theta, e.rope_theta);
    EXPECT_EQ(c->max_position_embeddings, 4096);
    EXPECT_EQ(c->sliding_window, 0);
    EXPECT_EQ(llama::llama_parameter_count(*c), e.parameters);
  }
}

// The cousins carry their family's properties, read as a checkpoint's config.json would be.
TEST(BenchShapes, FamilyShapesCarryTheirFamily) {
  const LlamaConfig qwen25 = *llama::bench_shape_config("qwen2.5-7b");
  EXPECT_EQ(qwen25.model_type, "qwen2");
  EXPECT_EQ(qwen25.architecture, "Qwen2ForCausalLM");
  EXPECT_TRUE(qwen25.has_bias(llama::Proj::V));
  EXPECT_FALSE(qwen25.has_bias(llama::Proj::O));
  const LlamaConfig qwen3 = *llama::bench_shape_config("qwen3-8b");
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_FALSE(qwen3.has_bias(llama::Proj::Q));
  EXPECT_EQ(llama::bench_shape_config("mistral-7b")->model_type, "mistral");
  EXPECT_EQ(llama::bench_shape_config("llama3-8b")->architecture, "LlamaForCausalLM");
}

// The tensors random_llama_weights fills, for every shape, from the config alone.
TEST(BenchShapes, WeightSlotsHaveTheModelsShapes) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    const LlamaConfig c = *llama::bench_shape_config(e.name);
    llama::LlamaWeights w;
    const auto slots = llama::weight_slots(c, w);
    ASSERT_EQ(slots.size(), size_t(3 + (9 + e.family_tensors_per_layer) * e.layers));
    ASSERT_EQ(w.layers.size(), size_t(e.layers));
    const int64_t kv = e.kv_heads * (e.hidden / e.heads);
    for (const auto& s : slots) {
      Shape want;
      if (s.dst == &w.embed || s.dst == &w.lm_head) want = {e.vocab, e.hidden};
      if (s.dst == &w.final_norm) want = {e.hidden};
      for (const auto& l : w.layers) {
        if (s.dst == &l.attn_norm || s.dst == &l.ffn_norm) want = {e.hidden};
        if (s.dst == &l.q || s.dst == &l.o) want = {e.hidden, e.hidden};
        if (s.dst == &l.k || s.dst == &l.v) want = {kv, e.hidden};
        if (s.dst == &l.gate || s.dst == &l.up) want = {e.intermediate, e.hidden};
        if (s.dst == &l.down) want = {e.hidden, e.intermediate};
        if (s.dst == &l.bias[size_t(llama::Proj::Q)]) want = {e.hidden};
        if (s.dst == &l.bias[size_t(llama::Proj::K)] || s.dst == &l.bias[size_t(llama::Proj::V)]) want = {kv};
        if (s.dst == &l.q_norm || s.dst == &l.k_norm) want = {e.hidden / e.heads};
      }
      EXPECT_EQ(s.shape, want) << s.name;
    }
  }
}

TEST(RandomInit, TinyWeightsOnTheCpu) {
  const LlamaConfig c = *llama::bench_shape_config("tiny");
  const llama::LlamaWeights w = llama::random_llama_weights(c, DType::F32, Device::cpu(), 3);
  llama::LlamaWeights again_w = llama::random_llama_weights(c, DType::F32, Device::cpu(), 3);
  llama::LlamaWeights other_w = llama::random_llama_weights(c, DType::F32, Device::cpu(), 4);
  std::vector<const Tensor*> mats = {&w.embed, &w.lm_head};
  for (const auto& l : w.layers)
    for (int p = 0; p < llama::kNumProj; ++p) mats.push_back(&l.proj(llama::Proj(p)));
  for (const Tensor* norm : {&w.final_norm, &w.layers[0].attn_norm, &w.layers[1].ffn_norm})
    for (float x : norm->to_float_vector()) ASSERT_EQ(x, 1.0f);
  double sq = 0;
  int64_t n = 0;
  for (const Tensor* m : mats) {
    ASSERT_EQ(m->dtype(), DType::F32);
    for (float x : m->to_float_vector()) {
      ASSERT_LT(std::abs(x), std::sqrt(3.0f) * 0.02f);
      sq += double(x) * x, ++n;
    }
  }
  EXPECT_NEAR(std::sqrt(sq / double(n)), 0.02, 0.0005);  // 1.4e5 values: 0.5% is ~5 sigma
  // Each tensor has its own stream, the same seed gives the same weights, another seed others.
  EXPECT_NE(w.layers[0].q.to_float_vector(), w.layers[0].o.to_float_vector());
  EXPECT_NE(w.layers[0].q.to_float_vector(), w.layers[1].q.to_float_vector());
  EXPECT_EQ(w.embed.to_float_vector(), again_w.embed.to_float_vector());
  EXPECT_EQ(w.layers[1].down.to_float_vector(), again_w.layers[1].down.to_float_vector());
  EXPECT_NE(w.embed.to_float_vector(), other_w.embed.to_float_vector());
}

TEST(RandomInit, TinyModelPredictsAboutUniformly) {
  // Small random weights give small logits, so the loss is near ln(vocab) on any tokens.
  const LlamaConfig c = *llama::bench_shape_config("tiny");
  llama::LlamaModel model(c, llama::random_llama_weights(c, DType::F32, Device::cpu(), 0),
                          [](const std::string&, const std::string&, Tensor w) {
                            return std::make_unique<FrozenLinear>(std::move(w));
                          });
  std::mt19937 rng(1);
  std::vector<int32_t> ids;
  for (int64_t v : random_ids({2 * 37}, int32_t(c.vocab_size), rng).to_int_vector())
    ids.push_back(int32_t(v));
  const ModelBatch b = make_batch(ids, ids, {}, 2, 37, Device::cpu());
  const LossSums s = model.evaluate(b);
  ASSERT_EQ(s.tokens, 2 * 36);
  EXPECT_NEAR(s.loss_sum / double(s.tokens), std::log(double(c.vocab_size)), 0.05);
}

TEST(RandomInit, RejectsNonFloatDtype) {
  const LlamaConfig c = *llama::bench_shape_config("tiny");
  EXPECT_THROW(llama::random_llama_weights(c, DType::I32, Device::cpu()), Error);
}

}  // namespace
}  // namespace loft::test
