// The Llama mapping: q/k permutation, tensor names and types, hyperparameters, llama3 rope_freqs,
// and whole merged-model and LoRA files written and read back.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <numeric>
#include <random>

#include "../common/test_util.h"
#include "engine/ops/rope_freq.h"
#include "export/gguf/gguf_encode.h"
#include "export/gguf/gguf_llama_writer.h"
#include "export/gguf/gguf_lora_writer.h"
#include "export/gguf/gguf_reader.h"

namespace loft::gguf {
namespace {

namespace fs = std::filesystem;

// numpy's w.reshape(n_head, 2, rows/n_head/2, cols).swapaxes(1, 2).reshape(rows, cols), spelled
// as a 4-D array copy.
std::vector<float> numpy_permute(const std::vector<float>& w, int64_t rows, int64_t cols, int64_t n_head) {
  const int64_t half = rows / n_head / 2;
  // a[h][s][i][c] = w[((h*2 + s)*half + i)*cols + c]; b[h][i][s][c] = a[h][s][i][c]
  std::vector<float> b(w.size());
  int64_t k = 0;
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t s = 0; s < 2; ++s)
        for (int64_t c = 0; c < cols; ++c) b[size_t(k++)] = w[size_t(((h * 2 + s) * half + i) * cols + c)];
  return b;
}

TEST(LlamaGguf, PermutationMatchesNumpyReshapeSwapaxes) {
  std::mt19937 rng(1);
  for (const auto& [rows, cols, heads] : {std::tuple{24, 5, 3}, {16, 3, 2}, {8, 1, 4}, {64, 7, 8}}) {
    std::vector<float> w(size_t(rows * cols));
    for (float& v : w) v = float(rng() % 1000);
    std::vector<float> got(w.size());
    permute_qk_rows(w, rows, cols, heads, got);
    EXPECT_EQ(got, numpy_permute(w, rows, cols, heads)) << rows << " rows, " << heads << " heads";
  }
  std::vector<float> w(12), out(12);
  EXPECT_THROW(permute_qk_rows(w, 6, 2, 2, out), Error);  // 3 rows per head
}

llama::LlamaConfig tiny_config(const std::string& extra = "") {
  return llama::LlamaConfig::from_json_text(
      R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 172,
          "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 512,
          "max_position_embeddings": 512, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
          "bos_token_id": 1, "eos_token_id": 2)" + extra + "}",
      "config.json");
}

fs::path stories_hf() { return test::data_path("models/stories260K-hf"); }

TEST(LlamaGguf, TensorNamesShapesAndTypes) {
  const llama::LlamaConfig cfg = tiny_config();
  const std::vector<LlamaTensor> t = llama_tensors(cfg);
  ASSERT_EQ(t.size(), 1 + 2 * 9 + 2u);
  EXPECT_EQ(t[0].gguf_name, "token_embd.weight");
  EXPECT_EQ(t[2].hf_name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(t[2].gguf_name, "blk.0.attn_q.weight");
  EXPECT_EQ(t[2].permute, Permute::Q);
  EXPECT_EQ(t[3].gguf_name, "blk.0.attn_k.weight");
  EXPECT_EQ(t[3].shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(t[3].permute, Permute::K);
  EXPECT_EQ(t[5].gguf_name, "blk.0.attn_output.weight");
  EXPECT_EQ(t[9].gguf_name, "blk.0.ffn_down.weight");
  EXPECT_EQ(t[19].gguf_name, "output_norm.weight");
  EXPECT_EQ(t[20].gguf_name, "output.weight");
  EXPECT_EQ(llama_tensors(tiny_config(R"(, "tie_word_embeddings": true)")).size(), 20u);
  const int64_t norm[] = {64}, down[] = {64, 172}, up[] = {172, 64};
  EXPECT_EQ(tensor_type_for("blk.0.attn_norm.weight", norm, OutType::Q8_0), TensorType::F32);
  EXPECT_EQ(tensor_type_for("blk.0.ffn_down.weight", down, OutType::Q8_0), TensorType::F16);  // 172 % 32
  EXPECT_EQ(tensor_type_for("blk.0.ffn_up.weight", up, OutType::Q8_0), TensorType::Q8_0);
  EXPECT_EQ(tensor_type_for("blk.0.ffn_up.weight", up, OutType::BF16), TensorType::BF16);
}

TEST(LlamaGguf, MergedModelRoundTripsInEveryType) {
  const llama::LlamaConfig cfg = tiny_config();
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<std::pair<LlamaTensor, std::vector<float>>> weights;
  for (const LlamaTensor& t : llama_tensors(cfg)) {
    std::vector<float> v(size_t(std::accumulate(t.shape.begin(), t.shape.end(), int64_t(1), std::multiplies<>())));
    for (float& x : v) x = normal(rng);
    weights.emplace_back(t, std::move(v));
  }
  for (const OutType type : {OutType::F32, OutType::F16, OutType::BF16, OutType::Q8_0}) {
    test::TempDir dir;
    const fs::path out = dir / "m.gguf";
    {
      LlamaWriter w(out, cfg, stories_hf(), type, "tiny");
      for (auto it = weights.rbegin(); it != weights.rend(); ++it) w.add(it->first.hf_name, it->second, it->first.shape);
      EXPECT_TRUE(w.missing().empty());
      EXPECT_FALSE(fs::exists(out));  // only the temp file until finish()
      w.finish();
    }
    const File f = read_gguf(out);
    EXPECT_EQ(f.at("general.architecture").get_string("a"), "llama");
    EXPECT_EQ(f.at("general.name").get_string("n"), "tiny");
    EXPECT_EQ(f.at("general.file_type").get<uint32_t>("f"), uint32_t(file_type_of(type)));
    EXPECT_EQ(f.at("llama.block_count").get<uint32_t>("b"), 2u);
    EXPECT_EQ(f.at("llama.context_length").get<uint32_t>("c"), 512u);
    EXPECT_EQ(f.at("llama.embedding_length").get<uint32_t>("e"), 64u);
    EXPECT_EQ(f.at("llama.feed_forward_length").get<uint32_t>("f"), 172u);
    EXPECT_EQ(f.at("llama.attention.head_count").get<uint32_t>("h"), 8u);
    EXPECT_EQ(f.at("llama.attention.head_count_kv").get<uint32_t>("h"), 4u);
    EXPECT_EQ(f.at("llama.rope.dimension_count").get<uint32_t>("r"), 8u);
    EXPECT_EQ(f.at("llama.vocab_size").get<uint32_t>("v"), 512u);
    EXPECT_EQ(f.at("llama.rope.freq_base").get<float>("r"), 10000.0f);
    EXPECT_EQ(f.at("llama.attention.layer_norm_rms_epsilon").get<float>("e"), 1e-5f);
    EXPECT_EQ(f.find("rope_freqs.weight"), nullptr);
    ASSERT_EQ(f.tensors.size(), weights.size());
    for (const auto& [t, values] : weights) {
      const TensorInfo& info = f.tensor(t.gguf_name);
      EXPECT_EQ(info.ne, (std::vector<int64_t>(t.shape.rbegin(), t.shape.rend()))) << t.gguf_name;
      EXPECT_EQ(info.type, tensor_type_for(t.gguf_name, t.shape, type));
      std::vector<float> want = values;
      if (t.permute != Permute::None)
        want = numpy_permute(values, t.shape[0], t.shape[1], t.permute == Permute::Q ? 8 : 4);
      const std::vector<float> got = decode_tensor(info.type, read_tensor_bytes(out, f, info));
      const std::vector<float> exact = decode_tensor(info.type, encode_tensor(info.type, want, t.shape.back()));
      EXPECT_EQ(got, exact) << t.gguf_name;
    }
  }
}

TEST(LlamaGguf, WriterRefusesWrongTensors) {
  const llama::LlamaConfig cfg = tiny_config(R"(, "tie_word_embeddings": true)");
  test::TempDir dir;
  LlamaWriter w(dir / "m.gguf", cfg, stories_hf(), OutType::F16, "");
  const std::vector<float> v(64 * 64);
  const int64_t bad[] = {64, 64}, norm[] = {64};
  EXPECT_NO_THROW(w.add("lm_head.weight", std::vector<float>(512 * 64), std::vector<int64_t>{512, 64}));  // tied: ignored
  EXPECT_THROW(w.add("model.layers.9.mlp.up_proj.weight", v, bad), Error);
  try {
    w.add("model.layers.0.self_attn.k_proj.weight", v, bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "has shape [64, 64], the config says [32, 64]"));
  }
  w.add("model.norm.weight", std::span<const float>(v.data(), 64), norm);
  EXPECT_THROW(w.add("model.norm.weight", std::span<const float>(v.data(), 64), norm), Error);
  try {
    w.finish();
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "'model.embed_tokens.weight' was never added"));
  }
  EXPECT_FALSE(fs::exists(dir / "m.gguf"));
}

TEST(LlamaGguf, Llama3RopeScalingWritesRopeFreqs) {
  const llama::LlamaConfig cfg = tiny_config(
      R"(, "tie_word_embeddings": true, "rope_theta": 100.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
          "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64})");
  test::TempDir dir;
  LlamaWriter w(dir / "m.gguf", cfg, stories_hf(), OutType::F32, "");
  for (const LlamaTensor& t : llama_tensors(cfg))
    w.add(t.hf_name, std::vector<float>(size_t(std::accumulate(t.shape.begin(), t.shape.end(), int64_t(1), std::multiplies<>()))), t.shape);
  w.finish();
  const File f = read_gguf(dir / "m.gguf");
  const TensorInfo& rf = f.tensor("rope_freqs.weight");
  EXPECT_EQ(rf.ne, (std::vector<int64_t>{4}));
  EXPECT_EQ(f.tensors[0].name, "rope_freqs.weight");
  const std::vector<float> factors = decode_tensor(TensorType::F32, read_tensor_bytes(dir / "m.gguf", f, rf));
  // llama.cpp divides the base frequency by the factor: it must reproduce transformers' llama3 rope.
  const std::vector<float> base = rope_inv_freq(8, 100.0, RopeScaling{});
  const std::vector<float> scaled = rope_inv_freq(8, 100.0, cfg.rope_scaling);
  bool smoothed = false;
  for (size_t i = 0; i < factors.size(); ++i) {
    EXPECT_NEAR(base[i] / factors[i], scaled[i], 1e-5 * std::abs(scaled[i])) << i;
    smoothed |= factors[i] > 1.0f && factors[i] < 8.0f;
  }
  EXPECT_EQ(factors.front(), 1.0f);
  EXPECT_EQ(factors.back(), 8.0f);
  EXPECT_TRUE(smoothed);
}

TEST(LlamaGguf, LoraAdapterLayout) {
  const llama::LlamaConfig cfg = tiny_config();
  test::TempDir dir;
  const fs::path out = dir / "a.gguf";
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  const auto rnd = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
  };
  const int64_t r = 4;
  const std::vector<float> qa = rnd(r * 64), qb = rnd(64 * r), da = rnd(r * 172), db = rnd(64 * r);
  {
    LoraWriter w(out, cfg, {{"model.layers.1.self_attn.q_proj.weight", r}, {"model.layers.0.mlp.down_proj.weight", r}}, 8.0f,
                 OutType::F32, "adapter");
    w.add("model.layers.0.mlp.down_proj.weight", da, std::vector<int64_t>{r, 172}, db, std::vector<int64_t>{64, r});
    EXPECT_THROW(w.add("model.layers.1.self_attn.q_proj.weight", qa, std::vector<int64_t>{r, 32}, qb, std::vector<int64_t>{64, r}), Error);
    w.add("model.layers.1.self_attn.q_proj.weight", qa, std::vector<int64_t>{r, 64}, qb, std::vector<int64_t>{64, r});
    w.finish();
  }
  EXPECT_THROW(LoraWriter(dir / "x.gguf", cfg, {{"model.embed_tokens.weight", r}}, 8.0f), Error);
  const File f = read_gguf(out);
  EXPECT_EQ(f.at("general.type").get_string("t"), "adapter");
  EXPECT_EQ(f.at("adapter.type").get_string("t"), "lora");
  EXPECT_EQ(f.at("adapter.lora.alpha").get<float>("a"), 8.0f);
  EXPECT_EQ(f.find("llama.block_count"), nullptr);
  ASSERT_EQ(f.tensors.size(), 4u);
  EXPECT_EQ(f.tensors[0].name, "blk.1.attn_q.weight.lora_a");
  EXPECT_EQ(f.tensors[0].ne, (std::vector<int64_t>{64, r}));
  EXPECT_EQ(f.tensors[1].name, "blk.1.attn_q.weight.lora_b");
  EXPECT_EQ(f.tensors[1].ne, (std::vector<int64_t>{r, 64}));
  EXPECT_EQ(f.tensors[2].ne, (std::vector<int64_t>{172, r}));
  const auto values = [&](const std::string& name) { return decode_tensor(TensorType::F32, read_tensor_bytes(out, f, f.tensor(name))); };
  EXPECT_EQ(values("blk.1.attn_q.weight.lora_a"), qa);
  EXPECT_EQ(values("blk.1.attn_q.weight.lora_b"), numpy_permute(qb, 64, r, 8));
  EXPECT_EQ(values("blk.0.ffn_down.weight.lora_a"), da);
  EXPECT_EQ(values("blk.0.ffn_down.weight.lora_b"), db);
}

}  // namespace
}  // namespace loft::gguf
