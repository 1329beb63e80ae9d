// config.json parsing: the two shared checkpoints, defaults, both RoPE spellings, llama3 scaling,
// and errors that name the file and the field.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "models/llama/config.h"
#include "tests/common/test_util.h"

namespace loft::llama {
namespace {

using nlohmann::json;

json base_config() {
  return json::parse(R"({
    "model_type": "llama", "hidden_size": 64, "intermediate_size": 172,
    "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 512,
    "rms_norm_eps": 1e-5, "rope_theta": 10000.0})");
}

LlamaConfig parse(const json& j) {
  return LlamaConfig::from_json_text(j.dump(), "cfg/config.json");
}

// Error text of parsing `j` (fails the test when it parses).
std::string parse_error(const json& j) {
  try {
    parse(j);
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cfg/config.json"), std::string::npos) << msg;
    return msg;
  }
  ADD_FAILURE() << "parsed: " << j.dump();
  return "";
}

TEST(LlamaConfig, Stories260KHf) {
  const auto c = load_llama_config(test::data_path("models/stories260K-hf"));
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, "default");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(c.torch_dtype, "float32");
  EXPECT_EQ(c.kv_dim(), 32);
  // q, k, v, o, gate, up, down
  EXPECT_EQ(c.projection_params_per_layer(), 64 * 64 * 2 + 32 * 64 * 2 + 172 * 64 * 3);
}

TEST(LlamaConfig, WideRandomUsesRopeParameters) {
  LOFT_REQUIRE_DATA("models/wide-random");
  const auto c = load_llama_config(test::data_path("models/wide-random/config.json"));
  EXPECT_EQ(c.hidden_size, 512);
  EXPECT_EQ(c.intermediate_size, 1376);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, "default");
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
}

TEST(LlamaConfig, DefaultsWhereOptional) {
  json j = base_config();
  j.erase("rms_norm_eps");
  j.erase("rope_theta");
  const auto c = parse(j);
  EXPECT_EQ(c.num_kv_heads, 8);  // = heads
  EXPECT_EQ(c.head_dim, 8);      // hidden / heads
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_TRUE(c.eos_token_ids.empty());
  j["eos_token_id"] = nullptr;  // written as null by some exporters
  EXPECT_TRUE(parse(j).eos_token_ids.empty());
}

TEST(LlamaConfig, EosList) {
  json j = base_config();
  j["eos_token_id"] = {128001, 128008, 128009};
  EXPECT_EQ(parse(j).eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  j["eos_token_id"] = {1, "x"};
  EXPECT_TRUE(test::contains(parse_error(j), "field eos_token_id must be a token id or a list"));
  j["eos_token_id"] = -3;
  EXPECT_TRUE(test::contains(parse_error(j), "eos_token_id"));
  j["eos_token_id"] = 2;
  j["bos_token_id"] = {1, 2};
  EXPECT_TRUE(test::contains(parse_error(j), "bos_token_id must be a single token id"));
}

TEST(LlamaConfig, RopeParametersWinOverTopLevelTheta) {
  json j = base_config();
  j["rope_parameters"] = {{"rope_theta", 500000.0}, {"rope_type", "default"}};
  EXPECT_DOUBLE_EQ(parse(j).rope_theta, 500000.0);
  j["rope_parameters"].erase("rope_theta");  // falls back to the top-level value
  EXPECT_DOUBLE_EQ(parse(j).rope_theta, 10000.0);
  j["rope_parameters"] = 5;
  EXPECT_TRUE(test::contains(parse_error(j), "field rope_parameters must be an object"));
  j["rope_parameters"] = {{"rope_theta", -1.0}};
  EXPECT_TRUE(test::contains(parse_error(j), "field rope_parameters.rope_theta must be positive"));
}

// Llama 3.1's scaling, in both spellings; the result drives rope_inv_freq exactly as written.
TEST(LlamaConfig, Llama3RopeScaling) {
  const json scaling = {{"factor", 8.0},
                        {"low_freq_factor", 1.0},
                        {"high_freq_factor", 4.0},
                        {"original_max_position_embeddings", 8192},
                        {"rope_type", "llama3"}};
  json tf4 = base_config();
  tf4["rope_theta"] = 500000.0;
  tf4["rope_scaling"] = scaling;
  json tf5 = base_config();
  tf5.erase("rope_theta");
  tf5["rope_parameters"] = scaling;
  tf5["rope_parameters"]["rope_theta"] = 500000.0;
  for (const json& j : {tf4, tf5}) {
    const auto c = parse(j);
    EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
    EXPECT_EQ(c.rope_scaling.type, "llama3");
    EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
    EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
    EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
    EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
    const auto plain = rope_inv_freq(int(c.head_dim), c.rope_theta, RopeScaling{});
    const auto scaled = rope_inv_freq(int(c.head_dim), c.rope_theta, c.rope_scaling);
    EXPECT_EQ(scaled.front(), plain.front());             // high frequency: untouched
    EXPECT_FLOAT_EQ(scaled.back(), plain.back() / 8.0f);  // low frequency: divided by factor
  }
  // The older "type" key and the linear type.
  json j = base_config();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_EQ(parse(j).rope_scaling.type, "linear");
  EXPECT_DOUBLE_EQ(parse(j).rope_scaling.factor, 2.0);
  j["rope_scaling"] = nullptr;  // null means no scaling
  EXPECT_EQ(parse(j).rope_scaling.type, "default");
}

TEST(LlamaConfig, RopeScalingErrors) {
  json j = base_config();
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  EXPECT_TRUE(test::contains(parse_error(j), "field rope_scaling.low_freq_factor is missing"));
  j["rope_scaling"]["low_freq_factor"] = "1";
  EXPECT_TRUE(
      test::contains(parse_error(j), "field rope_scaling.low_freq_factor must be a number"));
  j["rope_scaling"]["low_freq_factor"] = 4.0;
  EXPECT_TRUE(test::contains(parse_error(j), "high_freq_factor"));
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_TRUE(
      test::contains(parse_error(j), "field rope_scaling.rope_type 'yarn' is not supported"));
  j["rope_scaling"] = {{"type", "linear"}};
  EXPECT_TRUE(test::contains(parse_error(j), "field rope_scaling.factor is missing"));
}

TEST(LlamaConfig, MissingRequiredFields) {
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "vocab_size"}) {
    json j = base_config();
    j.erase(key);
    EXPECT_TRUE(test::contains(parse_error(j), cat("field ", key, " is missing")));
  }
}

TEST(LlamaConfig, WrongTypes) {
  struct Case {
    const char* key;
    json value;
    const char* expect;
  };
  const Case cases[] = {
      {"hidden_size", "64", "field hidden_size must be an integer"},
      {"hidden_size", 64.5, "field hidden_size must be an integer"},
      {"num_hidden_layers", 0, "field num_hidden_layers must be positive"},
      {"vocab_size", -5, "field vocab_size must be positive"},
      {"rms_norm_eps", "tiny", "field rms_norm_eps must be a number"},
      {"rms_norm_eps", 0.0, "field rms_norm_eps must be positive"},
      {"tie_word_embeddings", "yes", "field tie_word_embeddings must be true or false"},
      {"rope_theta", json::array(), "field rope_theta must be a number"},
      {"architectures", "Llama", "field architectures must be a list of strings"},
      {"torch_dtype", 16, "field torch_dtype must be a string"},
  };
  for (const Case& c : cases) {
    json j = base_config();
    j[c.key] = c.value;
    EXPECT_TRUE(test::contains(parse_error(j), c.expect));
  }
}

TEST(LlamaConfig, InconsistentOrUnsupported) {
  json j = base_config();
  j["num_key_value_heads"] = 3;
  EXPECT_TRUE(test::contains(
      parse_error(j), "field num_key_value_heads (3) does not divide num_attention_heads (8)"));
  j = base_config();
  j["hidden_size"] = 100;
  EXPECT_TRUE(test::contains(parse_error(j), "does not divide hidden_size (100)"));
  j["head_dim"] = 16;  // an explicit head_dim need not divide hidden
  EXPECT_EQ(parse(j).q_dim(), 128);
  j["head_dim"] = 7;
  EXPECT_TRUE(test::contains(parse_error(j), "field head_dim (7) must be even"));
  j = base_config();
  j["max_position_embeddings"] = 1;
  EXPECT_TRUE(test::contains(parse_error(j), "field max_position_embeddings (1) must be at least 2"));
  j = base_config();
  j["model_type"] = "gpt2";
  EXPECT_TRUE(test::contains(parse_error(j), "field model_type is 'gpt2'"));
  j = base_config();
  j["hidden_act"] = "gelu";
  EXPECT_TRUE(test::contains(parse_error(j), "field hidden_act is 'gelu'"));
}

TEST(LlamaConfig, BadFiles) {
  EXPECT_THROW(LlamaConfig::from_json_text("{oops", "x/config.json"), Error);
  EXPECT_THROW(LlamaConfig::from_json_text("[1]", "x/config.json"), Error);
  test::TempDir dir;
  try {
    load_llama_config(dir.path());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), (dir / "config.json").string()));
  }
}

}  // namespace
}  // namespace loft::llama
