// The Llama family in GGUF (issue 28): llama.cpp's architecture per family (qwen2, qwen3, llama
// for Mistral), the family's extra tensors (q/k/v biases, q/k norms) and their names, which
// architectures permute q/k, the arch-prefixed hyperparameters, and the refusals. That llama.cpp
// itself loads these files and scores text as loft does is tests/llamacpp (ctest
// LlamaCpp.*).
#include <gtest/gtest.h>

#include <functional>
#include <numeric>
#include <random>

#include "../common/test_util.h"
#include "export/gguf/gguf_encode.h"
#include "export/gguf/gguf_llama_writer.h"
#include "export/gguf/gguf_lora_writer.h"
#include "export/gguf/gguf_reader.h"

namespace loft::gguf {
namespace {

namespace fs = std::filesystem;

llama::LlamaConfig family_config(const std::string& model_type, const std::string& extra = "") {
  return llama::LlamaConfig::from_json_text(
      R"({"model_type": ")" + model_type + R"(", "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
          "max_position_embeddings": 256, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
          "tie_word_embeddings": true)" + extra + "}",
      "config.json");
}

const LlamaTensor& find(const std::vector<LlamaTensor>& plan, const std::string& gguf_name) {
  for (const LlamaTensor& t : plan)
    if (t.gguf_name == gguf_name) return t;
  throw Error(cat("no tensor ", gguf_name));
}

bool has(const std::vector<LlamaTensor>& plan, const std::string& gguf_name) {
  return std::any_of(plan.begin(), plan.end(), [&](const LlamaTensor& t) { return t.gguf_name == gguf_name; });
}

int64_t numel(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<>());
}

TEST(FamilyGguf, ArchitecturePerFamily) {
  EXPECT_EQ(gguf_architecture(family_config("llama")), "llama");
  EXPECT_EQ(gguf_architecture(family_config("mistral")), "llama");
  EXPECT_EQ(gguf_architecture(family_config("qwen2")), "qwen2");
  EXPECT_EQ(gguf_architecture(family_config("qwen3")), "qwen3");
  // What llama.cpp's architecture has no tensor for is refused, naming it.
  try {
    gguf_architecture(family_config("qwen3", R"(, "attention_bias": true)"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "qwen3 architecture has no bias on q_proj")) << e.what();
  }
  // Llama's optional biases all have llama.cpp tensors.
  EXPECT_EQ(gguf_architecture(family_config("llama", R"(, "attention_bias": true, "mlp_bias": true)")), "llama");
}

TEST(FamilyGguf, Qwen2HasQkvBiasesAndNoPermutation) {
  const std::vector<LlamaTensor> plan = llama_tensors(family_config("qwen2"));
  // Per layer: 2 norms, 7 weights, 3 biases; plus token_embd and output_norm (tied: no output).
  EXPECT_EQ(plan.size(), 2 * 12 + 2u);
  const LlamaTensor& qb = find(plan, "blk.0.attn_q.bias");
  EXPECT_EQ(qb.hf_name, "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(qb.shape, (std::vector<int64_t>{64}));
  EXPECT_EQ(find(plan, "blk.1.attn_k.bias").shape, (std::vector<int64_t>{32}));
  EXPECT_TRUE(has(plan, "blk.1.attn_v.bias"));
  EXPECT_FALSE(has(plan, "blk.0.attn_output.bias"));
  for (const LlamaTensor& t : plan) EXPECT_EQ(t.permute, Permute::None) << t.gguf_name << ": qwen2 is NEOX rope";
  // The bias follows its weight.
  for (size_t i = 0; i < plan.size(); ++i)
    if (plan[i].gguf_name.ends_with(".bias"))
      EXPECT_EQ(plan[i - 1].gguf_name.substr(0, plan[i - 1].gguf_name.size() - 7),
                plan[i].gguf_name.substr(0, plan[i].gguf_name.size() - 5));
}

TEST(FamilyGguf, Qwen3HasHeadNormsAndItsOwnHeadDim) {
  const std::vector<LlamaTensor> plan = llama_tensors(family_config("qwen3", R"(, "head_dim": 32)"));
  EXPECT_EQ(plan.size(), 2 * 11 + 2u);
  EXPECT_EQ(find(plan, "blk.0.attn_q_norm.weight").hf_name, "model.layers.0.self_attn.q_norm.weight");
  EXPECT_EQ(find(plan, "blk.1.attn_k_norm.weight").shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(find(plan, "blk.0.attn_q.weight").shape, (std::vector<int64_t>{128, 64}));  // 4 heads x 32
  EXPECT_EQ(find(plan, "blk.0.attn_output.weight").shape, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(find(plan, "blk.0.attn_q.weight").permute, Permute::None);
  const int64_t norm[] = {32};
  EXPECT_EQ(tensor_type_for("blk.0.attn_q_norm.weight", norm, OutType::Q8_0), TensorType::F32);
}

TEST(FamilyGguf, MistralIsALlamaAndPermutes) {
  const std::vector<LlamaTensor> plan = llama_tensors(family_config("mistral", R"(, "sliding_window": null)"));
  EXPECT_EQ(plan.size(), 2 * 9 + 2u);
  EXPECT_EQ(find(plan, "blk.0.attn_q.weight").permute, Permute::Q);
  EXPECT_EQ(find(plan, "blk.0.attn_k.weight").permute, Permute::K);
}

// Writes every tensor of `cfg` with random values and reads the file back.
struct Written {
  test::TempDir dir;
  std::vector<std::pair<LlamaTensor, std::vector<float>>> weights;
  File file;
};

std::unique_ptr<Written> write_random(const llama::LlamaConfig& cfg) {
  auto w = std::make_unique<Written>();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (const LlamaTensor& t : llama_tensors(cfg)) {
    std::vector<float> v(size_t(numel(t.shape)));
    for (float& x : v) x = normal(rng);
    w->weights.emplace_back(t, std::move(v));
  }
  LlamaWriter writer(w->dir / "m.gguf", cfg, test::data_path("models/stories260K-hf"), OutType::F32, "fam");
  for (const auto& [t, v] : w->weights) writer.add(t.hf_name, v, t.shape);
  writer.finish();
  w->file = read_gguf(w->dir / "m.gguf");
  return w;
}

std::vector<float> values_of(const Written& w, const std::string& gguf_name) {
  const TensorInfo& info = w.file.tensor(gguf_name);
  return decode_tensor(info.type, read_tensor_bytes(w.dir / "m.gguf", w.file, info));
}

TEST(FamilyGguf, Qwen3FileHasArchPrefixedKeysAndUnpermutedTensors) {
  const llama::LlamaConfig cfg = family_config("qwen3", R"(, "head_dim": 32)");
  const auto w = write_random(cfg);
  const File& f = w->file;
  EXPECT_EQ(f.at("general.architecture").get_string("a"), "qwen3");
  EXPECT_EQ(f.at("qwen3.attention.key_length").get<uint32_t>("k"), 32u);
  EXPECT_EQ(f.at("qwen3.attention.value_length").get<uint32_t>("v"), 32u);
  EXPECT_EQ(f.at("qwen3.rope.dimension_count").get<uint32_t>("r"), 32u);
  EXPECT_EQ(f.at("qwen3.embedding_length").get<uint32_t>("e"), 64u);
  EXPECT_EQ(f.at("qwen3.rope.freq_base").get<float>("r"), 1e6f);
  EXPECT_EQ(f.find("llama.block_count"), nullptr);
  ASSERT_EQ(f.tensors.size(), w->weights.size());
  for (const auto& [t, v] : w->weights) EXPECT_EQ(values_of(*w, t.gguf_name), v) << t.gguf_name;
}

TEST(FamilyGguf, LlamaAttentionBiasIsPermutedWithItsRows) {
  // convert_hf_to_gguf.py permutes q_proj.bias / k_proj.bias as it permutes their weights' rows.
  const llama::LlamaConfig cfg = family_config("llama", R"(, "attention_bias": true)");
  const auto w = write_random(cfg);
  for (const auto& [t, v] : w->weights) {
    if (!t.gguf_name.ends_with(".bias")) continue;
    std::vector<float> want = v;
    if (t.permute != Permute::None) {
      permute_qk_rows(v, t.shape[0], 1, permute_heads(cfg, t.permute), want);
      EXPECT_NE(want, v) << t.gguf_name;  // the permutation is not the identity here
    }
    EXPECT_EQ(values_of(*w, t.gguf_name), want) << t.gguf_name;
  }
  EXPECT_EQ(find(llama_tensors(cfg), "blk.0.attn_q.bias").permute, Permute::Q);
  EXPECT_EQ(find(llama_tensors(cfg), "blk.0.attn_v.bias").permute, Permute::None);
}

TEST(FamilyGguf, LoraAdapterNamesTheFamilysArchitecture) {
  const llama::LlamaConfig cfg = family_config("qwen2");
  test::TempDir dir;
  {
    LoraWriter w(dir / "a.gguf", cfg, {{"model.layers.0.self_attn.q_proj.weight", 4}}, 8.0f, OutType::F32, "");
    const std::vector<float> a(4 * 64, 0.5f), b(64 * 4, 0.25f);
    const int64_t sa[] = {4, 64}, sb[] = {64, 4};
    w.add("model.layers.0.self_attn.q_proj.weight", a, sa, b, sb);
    w.finish();
  }
  const File f = read_gguf(dir / "a.gguf");
  EXPECT_EQ(f.at("general.architecture").get_string("a"), "qwen2");
  // A bias is not a LoRA target.
  EXPECT_THROW(LoraWriter(dir / "b.gguf", cfg, {{"model.layers.0.self_attn.q_proj.bias", 4}}, 8.0f, OutType::F32, ""),
               Error);
}

}  // namespace
}  // namespace loft::gguf
