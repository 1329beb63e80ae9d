// The FP8 files follow their formats exactly, read back against the spec: compressed-tensors
// float-quantized (FP8_DYNAMIC: `weight` F8_E4M3 [out, in], `weight_scale` F32 [out, 1] per
// channel or [1] per tensor, config_groups/format/ignore/quantization_status keys) and
// transformers fp8 (`weight_scale_inv` F32 per 128x128 block, the reference folder's config keys);
// everything else bf16; the encoder matches the per-tensor quantizer bit for bit.
#include <fstream>
#include <set>

#include "engine/io/safetensors_checkpoint.h"
#include "engine/quant/quantize.h"
#include "engine/quant/scaled_fp8.h"
#include "models/llama/fp8_config.h"
#include "tests/export/export_fixture.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

// Exports the base of `model_dir` (a lora adapter trained on it when `adapter`) as fp8 `layout`.
fs::path export_fp8(const test::TempDir& dir, const std::string& layout) {
  const fs::path out = dir / ("fp8-" + layout);
  test::run_export({"--model", test::stories_dir().string(), "--format", "fp8", "--fp8-layout",
                    layout, "--out", out.string()});
  return out;
}

void expect_projection_tensors(const fs::path& out, const std::string& scale_suffix,
                               const std::function<Shape(int64_t, int64_t)>& scale_shape) {
  const SafetensorsCheckpoint ck = SafetensorsCheckpoint::open(out);
  const llama::LlamaConfig cfg = llama::load_llama_config(out);
  std::set<std::string> expected;
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    for (const char* n : {"input_layernorm", "post_attention_layernorm"}) {
      const std::string name = cat("model.layers.", l, ".", n, ".weight");
      expected.insert(name);
      EXPECT_EQ(ck.info(name).dtype, DType::BF16) << name;
    }
    for (const llama::ProjShape& p : cfg.projections()) {
      const std::string w = llama::hf_proj_name(l, p.proj);
      const std::string s = w.substr(0, w.size() - 6) + scale_suffix;
      expected.insert(w);
      expected.insert(s);
      EXPECT_EQ(ck.info(w).dtype, DType::F8_E4M3) << w;
      EXPECT_EQ(ck.info(w).shape, Shape({p.out, p.in})) << w;
      EXPECT_EQ(ck.info(s).dtype, DType::F32) << s;
      EXPECT_EQ(ck.info(s).shape, scale_shape(p.out, p.in)) << s;
    }
  }
  for (const char* n : {"model.embed_tokens.weight", "model.norm.weight"}) {
    expected.insert(n);
    EXPECT_EQ(ck.info(n).dtype, DType::BF16) << n;
  }
  const auto names = ck.names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected) << "no other tensors";
  for (const auto& f : ck.files()) EXPECT_EQ(f.metadata().at("format"), "pt");
}

TEST(Fp8Files, CompressedTensorsChannelIsFp8Dynamic) {
  test::TempDir dir;
  const fs::path out = export_fp8(dir, "channel");
  expect_projection_tensors(out, "weight_scale", [](int64_t o, int64_t) { return Shape{o, 1}; });
  const json qc = read_json(out / "config.json")["quantization_config"];
  EXPECT_EQ(qc["quant_method"], "compressed-tensors");
  EXPECT_EQ(qc["format"], "float-quantized");
  EXPECT_EQ(qc["quantization_status"], "compressed");
  EXPECT_EQ(qc["ignore"], json({"lm_head"}));
  EXPECT_TRUE(qc["kv_cache_scheme"].is_null());
  ASSERT_EQ(qc["config_groups"].size(), 1u);
  const json g = qc["config_groups"]["group_0"];
  EXPECT_EQ(g["targets"], json({"Linear"}));
  EXPECT_EQ(g["format"], "float-quantized");
  const json w = g["weights"], a = g["input_activations"];
  EXPECT_EQ(w["num_bits"], 8);
  EXPECT_EQ(w["type"], "float");
  EXPECT_EQ(w["strategy"], "channel");
  EXPECT_EQ(w["symmetric"], true);
  EXPECT_EQ(w["dynamic"], false);
  EXPECT_EQ(a["num_bits"], 8);
  EXPECT_EQ(a["type"], "float");
  EXPECT_EQ(a["strategy"], "token");
  EXPECT_EQ(a["dynamic"], true);
  EXPECT_EQ(a["symmetric"], true);
  EXPECT_TRUE(g["output_activations"].is_null());
  const auto scheme = llama::parse_fp8_checkpoint(read_json(out / "config.json"), "config.json");
  ASSERT_TRUE(scheme);
  EXPECT_EQ(scheme->describe(), llama::fp8_export_scheme("channel").describe());
  // The rest of config.json is the base's, with dtype bfloat16; the tokenizer files came along.
  const json base = read_json(test::stories_dir() / "config.json");
  const json cfg = read_json(out / "config.json");
  EXPECT_EQ(cfg["hidden_size"], base["hidden_size"]);
  EXPECT_EQ(cfg["torch_dtype"], "bfloat16");
  for (const char* f : {"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "generation_config.json"}) {
    EXPECT_TRUE(fs::exists(out / f)) << f;
  }
}

TEST(Fp8Files, CompressedTensorsTensorLayout) {
  test::TempDir dir;
  const fs::path out = export_fp8(dir, "tensor");
  expect_projection_tensors(out, "weight_scale", [](int64_t, int64_t) { return Shape{1}; });
  const json g = read_json(out / "config.json")["quantization_config"]["config_groups"]["group_0"];
  EXPECT_EQ(g["weights"]["strategy"], "tensor");
  EXPECT_EQ(g["input_activations"]["strategy"], "token");
}

TEST(Fp8Files, TransformersBlockMatchesTheReferenceFolder) {
  test::TempDir dir;
  const fs::path out = export_fp8(dir, "block");
  expect_projection_tensors(out, "weight_scale_inv", [](int64_t o, int64_t i) {
    return Shape{(o + 127) / 128, (i + 127) / 128};
  });
  const json qc = read_json(out / "config.json")["quantization_config"];
  const json ref = read_json(test::data_path("reference/fp8-block-transformers/config.json"))["quantization_config"];
  for (const auto& [key, value] : ref.items()) {
    ASSERT_TRUE(qc.contains(key)) << key;
    if (key != "modules_to_not_convert") {
      EXPECT_EQ(qc[key], value) << key;
    }
  }
  EXPECT_EQ(qc["modules_to_not_convert"], json({"lm_head"}));
}

TEST(Fp8Files, DecodedWeightsAreTheMergedOnesWithinE4M3Rounding) {
  test::TempDir dir;
  const fs::path out = export_fp8(dir, "channel");
  const SafetensorsCheckpoint base = SafetensorsCheckpoint::open(test::stories_dir());
  const SafetensorsCheckpoint ck = SafetensorsCheckpoint::open(out);
  const std::string name = "model.layers.2.mlp.down_proj.weight";
  const std::vector<float> w = base.tensor(name).to_float_vector();
  const Tensor codes = ck.tensor(name);
  const std::vector<float> s = ck.tensor("model.layers.2.mlp.down_proj.weight_scale").to_float_vector();
  const int64_t rows = codes.size(0), cols = codes.size(1);
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(w[size_t(r * cols + c)]));
    EXPECT_EQ(s[size_t(r)], amax / 448.0f) << "row " << r;
    for (int64_t c = 0; c < cols; ++c) {
      const float v = quant::code_values(quant::LowpFormat::E4M3)[codes.ptr<uint8_t>()[r * cols + c]] * s[size_t(r)];
      EXPECT_LE(std::fabs(v - w[size_t(r * cols + c)]), amax / 16.0f + 1e-12f);
    }
  }
}

TEST(Fp8Files, BlockEncoderOverTheWholeMatrixIsThePerTensorQuantizer) {
  std::mt19937 rng(2);
  const Tensor w = test::random_tensor({37, 70}, rng, -0.3f, 0.3f);
  const quant::ScaledFp8 q = quant::quantize_scaled_fp8(w, 37, 70, "w");
  const quant::QuantizedTensor ref = quant::quantize(w, quant::LowpFormat::E4M3);
  EXPECT_EQ(q.scales.ptr<float>()[0], ref.scale.ptr<float>()[0]);
  EXPECT_EQ(std::memcmp(q.codes.data(), ref.codes.data(), ref.codes.nbytes()), 0);
  // Per-block scales: each 16x32 block on its own, partial edge blocks included.
  const quant::ScaledFp8 b = quant::quantize_scaled_fp8(w, 16, 32, "w");
  EXPECT_EQ(b.scales.shape(), Shape({3, 3}));
  Tensor back = Tensor::empty(w.shape(), DType::F32);
  quant::dequantize(b, back);
  EXPECT_LT(test::rel_error(back, w), 0.05);
}

}  // namespace
}  // namespace loft
