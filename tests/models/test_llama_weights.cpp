// Loading the two shared HF checkpoints (every tensor checked against the file's bytes, a few
// values decoded by hand from raw bytes), parameter counts, dtype conversion, and synthetic
// folders with missing, mis-shaped, extra and sharded tensors.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/io/safetensors_reader.h"
#include "engine/io/safetensors_writer.h"
#include "models/llama/weights.h"
#include "tests/common/test_util.h"

namespace loft::llama {
namespace {

using nlohmann::json;

// Parses a safetensors file by hand: header JSON and the offset where data starts.
struct RawFile {
  std::vector<unsigned char> bytes;
  json header;
  size_t data_start = 0;
  explicit RawFile(const std::filesystem::path& p) : bytes(test::read_bytes(p)) {
    uint64_t n;
    std::memcpy(&n, bytes.data(), 8);
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + long(n));
    data_start = 8 + n;
  }
  const unsigned char* at(const std::string& name, size_t byte) const {
    return bytes.data() + data_start + header[name]["data_offsets"][0].get<size_t>() + byte;
  }
};

// Every (HF name, loaded tensor) pair of a LlamaWeights.
std::vector<std::pair<std::string, const Tensor*>> named(const LlamaWeights& w) {
  std::vector<std::pair<std::string, const Tensor*>> out{{"model.embed_tokens.weight", &w.embed},
                                                         {"model.norm.weight", &w.final_norm}};
  if (w.lm_head.defined()) out.emplace_back("lm_head.weight", &w.lm_head);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const std::string pre = cat("model.layers.", i, ".");
    out.emplace_back(pre + "input_layernorm.weight", &w.layers[i].attn_norm);
    out.emplace_back(pre + "post_attention_layernorm.weight", &w.layers[i].ffn_norm);
    for (int p = 0; p < kNumProj; ++p)
      out.emplace_back(hf_proj_name(int64_t(i), Proj(p)), &w.layers[i].proj(Proj(p)));
  }
  return out;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(LlamaWeights, WideRandomBf16TwoShards) {
  LOFT_REQUIRE_DATA("models/wide-random");
  const auto dir = test::data_path("models/wide-random");
  const auto cfg = load_llama_config(dir);
  const auto ck = SafetensorsCheckpoint::open(dir);
  ASSERT_EQ(ck.files().size(), 2u);
  const auto w = load_llama_weights(ck, cfg, DType::BF16, Device::cpu());
  ASSERT_EQ(w.layers.size(), 2u);
  ASSERT_TRUE(w.lm_head.defined());
  EXPECT_EQ(w.layers[1].k.shape(), (Shape{256, 512}));
  EXPECT_EQ(w.layers[0].down.shape(), (Shape{512, 1376}));

  // Every tensor equals the bytes of the shard that holds it, read on its own.
  const auto s1 = SafetensorsReader::open(dir / "model-00001-of-00002.safetensors");
  const auto s2 = SafetensorsReader::open(dir / "model-00002-of-00002.safetensors");
  const auto all = named(w);
  EXPECT_EQ(all.size(), 3u + 2u * 9u);
  for (const auto& [name, t] : all) {
    const auto& file = s1.contains(name) ? s1 : s2;
    EXPECT_TRUE(same_bytes(*t, file.tensor(name))) << name;
    EXPECT_TRUE(t->device().is_cpu());
  }
  // Hand-decoded bf16 from the raw bytes of shard 2 (lm_head, layer 1 norm).
  const RawFile raw(dir / "model-00002-of-00002.safetensors");
  for (const auto& [name, t] :
       {std::pair{"lm_head.weight", &w.lm_head},
        std::pair{"model.layers.1.input_layernorm.weight", &w.layers[1].attn_norm}}) {
    const auto vals = t->to_float_vector();
    for (size_t i : {size_t(0), size_t(3), vals.size() - 1}) {
      const unsigned char* p = raw.at(name, 2 * i);
      uint32_t bits = (uint32_t(p[1]) << 24) | (uint32_t(p[0]) << 16);  // little-endian bf16
      float expect;
      std::memcpy(&expect, &bits, 4);
      EXPECT_EQ(vals[i], expect) << name << " element " << i;
    }
  }

  // Exact count over every tensor in both shards: the index's own metadata says 6326784.
  EXPECT_EQ(ck.parameter_count(), 6326784);
  std::ifstream idx(dir / "model.safetensors.index.json");
  EXPECT_EQ(ck.parameter_count(), json::parse(idx)["metadata"]["total_parameters"].get<int64_t>());
  EXPECT_EQ(ck.dtypes(), std::vector<DType>{DType::BF16});
}

TEST(LlamaWeights, WideRandomWidenedToF32IsExact) {
  LOFT_REQUIRE_DATA("models/wide-random");
  const auto dir = test::data_path("models/wide-random");
  const auto ck = SafetensorsCheckpoint::open(dir);
  const auto w = load_llama_weights(ck, load_llama_config(dir), DType::F32, Device::cpu());
  for (const auto& [name, t] : named(w)) {
    ASSERT_EQ(t->dtype(), DType::F32) << name;
    EXPECT_EQ(t->to_float_vector(), ck.tensor(name).to_float_vector()) << name;
  }
}

TEST(LlamaWeights, Stories260KF32Tied) {
  const auto dir = test::data_path("models/stories260K-hf");
  const auto cfg = load_llama_config(dir);
  const auto ck = SafetensorsCheckpoint::open(dir);
  const auto w = load_llama_weights(ck, cfg, DType::F32, Device::cpu());
  EXPECT_FALSE(w.lm_head.defined());
  EXPECT_EQ(&w.output_weight(), &w.embed);
  ASSERT_EQ(w.layers.size(), 5u);

  const auto file = SafetensorsReader::open(dir / "model.safetensors");
  for (const auto& [name, t] : named(w)) EXPECT_TRUE(same_bytes(*t, file.tensor(name))) << name;
  // Loaded tensors are copies, not views of the read-only mapping.
  EXPECT_NE(w.embed.data(), file.tensor("model.embed_tokens.weight").data());

  const RawFile raw(dir / "model.safetensors");
  const auto q = w.layers[2].q.to_float_vector();
  for (size_t i : {size_t(0), size_t(65), size_t(4095)}) {
    float expect;
    std::memcpy(&expect, raw.at("model.layers.2.self_attn.q_proj.weight", 4 * i), 4);
    EXPECT_EQ(q[i], expect) << i;
  }

  // Parameter count computed independently from the header's byte spans (all F32).
  int64_t expect = 0;
  for (const auto& [name, e] : raw.header.items()) {
    if (name == "__metadata__") continue;
    ASSERT_EQ(e["dtype"], "F32");
    expect += (e["data_offsets"][1].get<int64_t>() - e["data_offsets"][0].get<int64_t>()) / 4;
  }
  EXPECT_EQ(ck.parameter_count(), expect);
  EXPECT_EQ(expect, 512 * 64 + 64 + 5 * (2 * 64 + cfg.projection_params_per_layer()));
}

TEST(LlamaWeights, Stories260KNarrowedToBf16RoundsToNearestEven) {
  const auto dir = test::data_path("models/stories260K-hf");
  const auto ck = SafetensorsCheckpoint::open(dir);
  const auto w = load_llama_weights(ck, load_llama_config(dir), DType::BF16, Device::cpu());
  for (const auto& [name, t] : named(w)) {
    ASSERT_EQ(t->dtype(), DType::BF16) << name;
    const auto src = ck.tensor(name).to_float_vector();
    const auto* got = t->ptr<uint16_t>();
    for (size_t i = 0; i < src.size(); ++i)
      ASSERT_EQ(got[i], f32_to_bf16(src[i])) << name << " element " << i;
  }
}

// ---- synthetic folders ---------------------------------------------------------------------

const char* kTinyConfig = R"({"model_type": "llama", "hidden_size": 8, "intermediate_size": 12,
  "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 16,
  "tie_word_embeddings": false})";

std::map<std::string, Tensor> tiny_tensors(const LlamaConfig& c, std::mt19937& rng) {
  std::map<std::string, Tensor> m;
  m["model.embed_tokens.weight"] = test::random_tensor({c.vocab_size, c.hidden_size}, rng);
  m["model.norm.weight"] = test::random_tensor({c.hidden_size}, rng);
  m["lm_head.weight"] = test::random_tensor({c.vocab_size, c.hidden_size}, rng);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    m[cat("model.layers.", i, ".input_layernorm.weight")] =
        test::random_tensor({c.hidden_size}, rng);
    m[cat("model.layers.", i, ".post_attention_layernorm.weight")] =
        test::random_tensor({c.hidden_size}, rng);
    for (const ProjShape& p : c.projections())
      m[hf_proj_name(i, p.proj)] = test::random_tensor({p.out, p.in}, rng);
  }
  return m;
}

struct TinyFolder {
  test::TempDir dir;
  LlamaConfig cfg = LlamaConfig::from_json_text(kTinyConfig, "tiny");
  std::map<std::string, Tensor> tensors;
  TinyFolder() {
    std::mt19937 rng(3);
    tensors = tiny_tensors(cfg, rng);
    std::ofstream(dir / "config.json") << kTinyConfig;
  }
  void write() { write_safetensors(dir / "model.safetensors", tensors); }
  std::string load_error() {
    try {
      load_llama_weights(SafetensorsCheckpoint::open(dir.path()), cfg, DType::F32, Device::cpu());
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "loaded";
    return "";
  }
};

TEST(LlamaWeights, SyntheticLoadsAndIgnoresExtras) {
  TinyFolder f;
  f.tensors["model.layers.0.self_attn.rotary_emb.inv_freq"] = Tensor::zeros({2}, DType::F32);
  f.tensors["model.extra.position_ids"] = Tensor::zeros({3}, DType::I64);
  f.write();
  const auto ck = SafetensorsCheckpoint::open(f.dir.path());
  const auto w = load_llama_weights(ck, f.cfg, DType::F32, Device::cpu());
  for (const auto& [name, t] : named(w)) EXPECT_TRUE(same_bytes(*t, f.tensors.at(name))) << name;
  EXPECT_EQ(ck.parameter_count(), [&] {
    int64_t n = 0;
    for (const auto& kv : f.tensors) n += kv.second.numel();
    return n;
  }());
  EXPECT_THROW(load_llama_weights(ck, f.cfg, DType::F16, Device::cpu()), Error);
}

TEST(LlamaWeights, MissingTensorNamedWithExpectedShape) {
  TinyFolder f;
  f.tensors.erase("model.layers.1.mlp.up_proj.weight");
  f.write();
  const std::string msg = f.load_error();
  EXPECT_TRUE(test::contains(msg, "model.layers.1.mlp.up_proj.weight is missing"));
  EXPECT_TRUE(test::contains(msg, "[12, 8]"));
  EXPECT_TRUE(test::contains(msg, f.dir.path().string()));
}

TEST(LlamaWeights, UntiedWithoutLmHeadIsMissing) {
  TinyFolder f;
  f.tensors.erase("lm_head.weight");
  f.write();
  EXPECT_TRUE(test::contains(f.load_error(), "lm_head.weight is missing"));
  f.cfg.tie_word_embeddings = true;  // tied: lm_head is not needed
  const auto w = load_llama_weights(SafetensorsCheckpoint::open(f.dir.path()), f.cfg, DType::F32,
                                    Device::cpu());
  EXPECT_FALSE(w.lm_head.defined());
}

TEST(LlamaWeights, MisShapedTensorNamedWithExpectedAndFound) {
  TinyFolder f;
  f.tensors["model.layers.0.self_attn.k_proj.weight"] =
      Tensor::zeros({8, 8}, DType::F32);  // [4, 8]
  f.write();
  const std::string msg = f.load_error();
  EXPECT_TRUE(
      test::contains(msg, "model.safetensors: tensor model.layers.0.self_attn.k_proj.weight"));
  EXPECT_TRUE(test::contains(msg, "has shape [8, 8], expected [4, 8]"));
  // A transposed weight is caught the same way.
  std::mt19937 rng(1);
  f.tensors = tiny_tensors(f.cfg, rng);
  f.tensors["model.layers.1.mlp.down_proj.weight"] = Tensor::zeros({12, 8}, DType::F32);
  f.write();
  EXPECT_TRUE(test::contains(f.load_error(), "has shape [12, 8], expected [8, 12]"));
}

TEST(LlamaWeights, IntegerTensorRejected) {
  TinyFolder f;
  f.tensors["model.norm.weight"] = Tensor::zeros({8}, DType::I32);
  f.write();
  EXPECT_TRUE(test::contains(f.load_error(), "model.norm.weight is I32, expected a float dtype"));
}

TEST(LlamaWeights, ShardedSyntheticAndAbsentShard) {
  TinyFolder f;
  std::map<std::string, Tensor> a, b;
  json weight_map;
  for (const auto& [name, t] : f.tensors) {
    const bool first = name.find("layers.1") == std::string::npos;
    (first ? a : b)[name] = t;
    weight_map[name] = first ? "part-a.safetensors" : "part-b.safetensors";
  }
  write_safetensors(f.dir / "part-a.safetensors", a);
  write_safetensors(f.dir / "part-b.safetensors", b);
  std::ofstream(f.dir / "model.safetensors.index.json") << json{{"weight_map", weight_map}}.dump();
  const auto w = load_llama_weights(SafetensorsCheckpoint::open(f.dir.path()), f.cfg, DType::BF16,
                                    Device::cpu());
  for (const auto& [name, t] : named(w)) {
    const auto src = f.tensors.at(name).to_float_vector();
    const auto* got = t->ptr<uint16_t>();
    for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(got[i], f32_to_bf16(src[i])) << name;
  }
  std::filesystem::remove(f.dir / "part-b.safetensors");
  const std::string msg = f.load_error();
  EXPECT_TRUE(test::contains(msg, "model.safetensors.index.json"));
  EXPECT_TRUE(test::contains(msg, "part-b.safetensors"));
}

TEST(LlamaWeights, Fp8StoredWeightsAreWidened) {
  TinyFolder f;
  std::vector<uint8_t> codes(8);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t(0x30 + 3 * i);
  f.tensors["model.norm.weight"] = Tensor::from_host(codes.data(), {8}, DType::F8_E4M3);
  f.tensors["model.layers.0.input_layernorm.weight"] =
      Tensor::from_host(codes.data(), {8}, DType::F8_E5M2);
  f.write();
  const auto w = load_llama_weights(SafetensorsCheckpoint::open(f.dir.path()), f.cfg, DType::F32,
                                    Device::cpu());
  const auto n = w.final_norm.to_float_vector();
  const auto l = w.layers[0].attn_norm.to_float_vector();
  for (size_t i = 0; i < codes.size(); ++i) {
    EXPECT_EQ(n[i], fp8_e4m3_to_f32(codes[i]));
    EXPECT_EQ(l[i], fp8_e5m2_to_f32(codes[i]));
  }
}

}  // namespace
}  // namespace loft::llama
