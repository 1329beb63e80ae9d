// FP8 checkpoints as a base model (models/llama/fp8_config.h, fp8_checkpoint.h): the transformers
// reference folder and written compressed-tensors folders load, and every projection equals
// decode(code) x scale of its block, computed here from the file's own tensors with an independent
// block lookup (partial edge blocks included).
#include <gtest/gtest.h>

#include <cstring>

#include "engine/io/safetensors_reader.h"
#include "models/llama/weights.h"
#include "tests/common/fp8_folder.h"
#include "tests/common/test_util.h"

namespace loft::llama {
namespace {

namespace fs = std::filesystem;
using test::Fp8Layout;

fs::path reference() { return test::data_path("reference/fp8-block-transformers"); }

// What the weight `name` must load as (F32), from the file's codes and scales.
std::vector<float> expected_weight(const SafetensorsReader& file, const std::string& name,
                                   const std::string& scale_name, int64_t rows, int64_t cols) {
  return test::fp8_reference_values(file.tensor(name), file.tensor(scale_name), rows, cols);
}

std::vector<float> values(const Tensor& t) { return t.to_float_vector(); }

// Every projection of `dir` loaded as F32 and as BF16 against expected_weight; the bf16 tensors
// (embeddings, norms, lm_head) as stored.
void expect_exact(const fs::path& dir, const std::string& scale_suffix, int64_t rows, int64_t cols) {
  const LlamaConfig cfg = load_llama_config(dir);
  const auto ck = SafetensorsCheckpoint::open(dir);
  const auto file = SafetensorsReader::open(dir / "model.safetensors");
  const LlamaWeights f32 = load_llama_weights(ck, cfg, DType::F32, Device::cpu());
  const LlamaWeights bf16 = load_llama_weights(ck, cfg, DType::BF16, Device::cpu());
  int checked = 0;
  for (int64_t l = 0; l < cfg.num_layers; ++l)
    for (int p = 0; p < kNumProj; ++p) {
      const std::string name = hf_proj_name(l, Proj(p));
      const std::string scale = name.substr(0, name.size() - 6) + scale_suffix;
      const std::vector<float> want = expected_weight(file, name, scale, rows, cols);
      const Tensor& got = f32.layers[size_t(l)].proj(Proj(p));
      ASSERT_EQ(got.dtype(), DType::F32) << name;
      EXPECT_EQ(values(got), want) << name;
      const auto* h = bf16.layers[size_t(l)].proj(Proj(p)).ptr<uint16_t>();
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(h[i], f32_to_bf16(want[i])) << name << " element " << i << ": rounded once";
      ++checked;
    }
  EXPECT_EQ(checked, cfg.num_layers * kNumProj);
  EXPECT_EQ(values(f32.lm_head), file.tensor("lm_head.weight").to_float_vector());
  EXPECT_EQ(values(f32.embed), file.tensor("model.embed_tokens.weight").to_float_vector());
  EXPECT_EQ(values(f32.layers[0].attn_norm),
            file.tensor("model.layers.0.input_layernorm.weight").to_float_vector());
}

TEST(Fp8Checkpoint, TransformersReferenceConfig) {
  const LlamaConfig cfg = load_llama_config(reference());
  ASSERT_TRUE(cfg.quantization.has_value());
  const Fp8Checkpoint& q = *cfg.quantization;
  EXPECT_EQ(q.quant_method, "fp8");
  EXPECT_EQ(q.granularity, Fp8Checkpoint::Granularity::Block);
  EXPECT_EQ(q.block_rows, 128);
  EXPECT_EQ(q.block_cols, 128);
  EXPECT_EQ(q.scale_name, "weight_scale_inv");
  EXPECT_EQ(q.describe(), "fp8 e4m3, block 128x128 (transformers fp8)");
  EXPECT_EQ(cfg.hidden_size, 256);
  EXPECT_EQ(cfg.intermediate_size, 768);
  EXPECT_EQ(cfg.num_kv_heads, 2);
  EXPECT_EQ(cfg.vocab_size, 512);
}

TEST(Fp8Checkpoint, TransformersReferenceDecodesExactly) {
  expect_exact(reference(), "weight_scale_inv", 128, 128);
  // The reference's scale grids are whole blocks: k_proj [128, 256] has 1 x 2 of them.
  const auto file = SafetensorsReader::open(reference() / "model.safetensors");
  EXPECT_EQ(file.info("model.layers.0.self_attn.k_proj.weight_scale_inv").shape, (Shape{1, 2}));
  EXPECT_EQ(file.info("model.layers.1.mlp.down_proj.weight_scale_inv").shape, (Shape{2, 6}));
}

TEST(Fp8Checkpoint, PartialEdgeBlocks) {
  // hidden 72, FFN 200: gate/up [200, 72] have a 2 x 1 grid of 128-blocks, both partial at the
  // bottom and on the right; 32 x 48 blocks leave partial blocks on every projection.
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{128, 128}, {32, 48}, {1, 200}}) {
    test::TempDir dir;
    test::Fp8FolderOptions o;
    o.block_rows = rows;
    o.block_cols = cols;
    const auto f = test::write_fp8_folder(dir.path(), o);
    if (rows == 128) {
      EXPECT_EQ(f.tensors.at("model.layers.0.mlp.gate_proj.weight_scale_inv").shape(), (Shape{2, 1}));
    }
    SCOPED_TRACE(cat("blocks ", rows, "x", cols));
    expect_exact(dir.path(), "weight_scale_inv", rows, cols);
  }
}

TEST(Fp8Checkpoint, CompressedTensorsPerTensorAndPerChannel) {
  struct Case {
    Fp8Layout layout;
    DType scale_dtype;
    bool scalar;
    const char* describe;
  };
  for (const Case c :
       {Case{Fp8Layout::CtTensor, DType::F32, false, "fp8 e4m3, per-tensor (compressed-tensors float-quantized)"},
        Case{Fp8Layout::CtTensor, DType::BF16, true, "fp8 e4m3, per-tensor (compressed-tensors float-quantized)"},
        Case{Fp8Layout::CtChannel, DType::F32, false, "fp8 e4m3, per-channel (compressed-tensors float-quantized)"},
        Case{Fp8Layout::CtChannel, DType::BF16, false, "fp8 e4m3, per-channel (compressed-tensors float-quantized)"}}) {
    test::TempDir dir;
    test::Fp8FolderOptions o;
    o.layout = c.layout;
    o.scale_dtype = c.scale_dtype;
    o.scalar_scale = c.scalar;
    test::write_fp8_folder(dir.path(), o);
    const LlamaConfig cfg = load_llama_config(dir.path());
    ASSERT_TRUE(cfg.quantization.has_value());
    EXPECT_EQ(cfg.quantization->describe(), c.describe);
    EXPECT_EQ(cfg.quantization->not_quantized, std::vector<std::string>{"lm_head"});
    SCOPED_TRACE(c.describe);
    const bool tensor = c.layout == Fp8Layout::CtTensor;
    expect_exact(dir.path(), "weight_scale", tensor ? 0 : 1, 0);
  }
}

TEST(Fp8Checkpoint, KeepLoadHoldsTheFilesCodesAndScales) {
  const LlamaConfig cfg = load_llama_config(reference());
  const auto ck = SafetensorsCheckpoint::open(reference());
  const LlamaWeights w = load_llama_weights(ck, cfg, DType::F32, Device::cpu(), Fp8Load::keep);
  for (int64_t l = 0; l < cfg.num_layers; ++l)
    for (int p = 0; p < kNumProj; ++p) {
      const std::string name = hf_proj_name(l, Proj(p));
      EXPECT_FALSE(w.layers[size_t(l)].proj(Proj(p)).defined()) << name << ": not decoded";
      const quant::ScaledFp8& f = w.layers[size_t(l)].fp8[size_t(p)];
      ASSERT_TRUE(f.defined()) << name;
      const Tensor codes = ck.tensor(name);
      EXPECT_EQ(std::memcmp(f.codes.data(), codes.data(), codes.nbytes()), 0) << name;
      EXPECT_EQ(values(f.scales), ck.tensor(name + "_scale_inv").to_float_vector()) << name;
      EXPECT_EQ(f.block_rows, 128);
    }
  EXPECT_TRUE(w.lm_head.defined());
  EXPECT_EQ(w.lm_head.dtype(), DType::F32);
}

}  // namespace
}  // namespace loft::llama
