// config.json of the Llama-family cousins (models/llama/family.h): each family's properties as
// transformers builds them (Qwen2's q/k/v bias, Qwen3's q/k norm and explicit head_dim, Mistral's
// window, Llama's attention_bias / mlp_bias), both rope spellings, and refusals that name the file
// and the key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/llama/config.h"
#include "models/llama/family.h"
#include "tests/common/test_util.h"

namespace loft::llama {
namespace {

using nlohmann::json;

// The reference models' shapes (scripts/dev/make_family_references.py).
json family_config(const std::string& model_type) {
  json j = json::parse(R"({"hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
    "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0})");
  j["model_type"] = model_type;
  return j;
}

LlamaConfig parse(const json& j) { return LlamaConfig::from_json_text(j.dump(), "fam/config.json"); }

std::string parse_error(const json& j) {
  try {
    parse(j);
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(test::contains(msg, "fam/config.json"));
    return msg;
  }
  ADD_FAILURE() << "parsed: " << j.dump();
  return "";
}

std::array<bool, kNumProj> biased(std::initializer_list<Proj> ps) {
  std::array<bool, kNumProj> out{};
  for (Proj p : ps) out[size_t(p)] = true;
  return out;
}

TEST(FamilyConfig, Qwen2BiasesQkvOnly) {
  json j = family_config("qwen2");
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["use_sliding_window"] = false;
  j["sliding_window"] = nullptr;  // as transformers writes it when the window is off
  j["max_window_layers"] = 28;
  j["layer_types"] = {"full_attention", "full_attention"};
  j["tie_word_embeddings"] = true;
  const LlamaConfig c = parse(j);
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_EQ(c.bias, biased({Proj::Q, Proj::K, Proj::V}));
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(family_differences(c), "q/k/v bias");
  // transformers' Qwen2Attention biases q, k, v whatever attention_bias says.
  j["attention_bias"] = false;
  EXPECT_EQ(parse(j).bias, biased({Proj::Q, Proj::K, Proj::V}));
}

TEST(FamilyConfig, Qwen3NormsHeadsAndExplicitHeadDim) {
  json j = family_config("qwen3");
  j["head_dim"] = 32;  // not hidden / heads (16)
  const LlamaConfig c = parse(j);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.bias, biased({}));
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.q_dim(), 128);
  EXPECT_EQ(c.kv_dim(), 64);
  const auto p = c.projections();
  EXPECT_EQ(p[size_t(Proj::Q)].out, 128);
  EXPECT_EQ(p[size_t(Proj::O)].out, 64);
  EXPECT_EQ(p[size_t(Proj::O)].in, 128);
  EXPECT_EQ(family_differences(c), "per-head q/k RMSNorm, head_dim 32 (q 128 wide, hidden 64)");
  j["attention_bias"] = true;  // Qwen3Attention: q, k, v and o
  EXPECT_EQ(parse(j).bias, biased({Proj::Q, Proj::K, Proj::V, Proj::O}));
}

TEST(FamilyConfig, MistralWindow) {
  json j = family_config("mistral");
  j["sliding_window"] = 16;
  EXPECT_EQ(parse(j).sliding_window, 16);
  EXPECT_EQ(parse(j).bias, biased({}));
  EXPECT_EQ(family_differences(parse(j)), "sliding window 16");
  j["sliding_window"] = nullptr;  // Mistral 7B v0.2 and later: no window
  EXPECT_EQ(parse(j).sliding_window, 0);
  EXPECT_EQ(family_differences(parse(j)), "");
  j.erase("sliding_window");  // MistralConfig's default
  EXPECT_EQ(parse(j).sliding_window, 4096);
  j["sliding_window"] = 0;
  EXPECT_TRUE(test::contains(parse_error(j), "sliding_window"));
  j["sliding_window"] = 16;
  j["layer_types"] = {"sliding_attention", "sliding_attention"};
  EXPECT_EQ(parse(j).sliding_window, 16);
}

TEST(FamilyConfig, LlamaBiasesFromAttentionAndMlpBias) {
  json j = family_config("llama");
  EXPECT_EQ(parse(j).bias, biased({}));
  j["attention_bias"] = true;
  EXPECT_EQ(parse(j).bias, biased({Proj::Q, Proj::K, Proj::V, Proj::O}));
  j["mlp_bias"] = true;
  EXPECT_EQ(parse(j).bias, biased({Proj::Q, Proj::K, Proj::V, Proj::O, Proj::Gate, Proj::Up, Proj::Down}));
  EXPECT_EQ(family_differences(parse(j)), "q/k/v/o/gate/up/down bias");
  j.erase("model_type");  // llama by default
  EXPECT_EQ(parse(j).model_type, "llama");
}

// transformers 5 writes rope_parameters; transformers 4 a top-level rope_theta: the same model.
TEST(FamilyConfig, BothRopeSpellingsReadTheSame) {
  for (const char* type : {"llama", "qwen2", "qwen3", "mistral"}) {
    SCOPED_TRACE(type);
    json v4 = family_config(type), v5 = family_config(type);
    v5.erase("rope_theta");
    v5["rope_parameters"] = {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
    const LlamaConfig a = parse(v4), b = parse(v5);
    EXPECT_DOUBLE_EQ(a.rope_theta, b.rope_theta);
    EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
    EXPECT_EQ(a.bias, b.bias);
    EXPECT_EQ(a.head_dim, 16);  // hidden / heads where head_dim is not given
  }
}

TEST(FamilyConfig, RefusalsNameTheKey) {
  json j = family_config("gpt2");
  EXPECT_TRUE(test::contains(parse_error(j), "field model_type is 'gpt2'"));
  j.erase("hidden_size");  // the family is named before a field it lacks
  EXPECT_TRUE(test::contains(parse_error(j), "model_type"));
  for (const char* type : {"qwen2", "qwen3"}) {
    j = family_config(type);
    j["use_sliding_window"] = true;
    j["sliding_window"] = 4096;
    EXPECT_TRUE(test::contains(parse_error(j), "field use_sliding_window is true"));
  }
  j = family_config("qwen2");
  j["layer_types"] = {"full_attention", "sliding_attention"};
  EXPECT_TRUE(test::contains(parse_error(j), "field layer_types has 'sliding_attention'"));
  j["layer_types"] = {"full_attention"};
  EXPECT_TRUE(test::contains(parse_error(j), "field layer_types lists 1 layers; num_hidden_layers is 2"));
  j = family_config("mistral");
  j["sliding_window"] = 16;
  j["layer_types"] = {"full_attention", "sliding_attention"};
  EXPECT_TRUE(test::contains(parse_error(j), "field layer_types has 'full_attention'"));
}

}  // namespace
}  // namespace loft::llama
