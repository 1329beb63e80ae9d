// How each method takes an FP8 checkpoint's projections (engine/peft/weight_source.h):
//  - per-tensor scales: FALQON's backbone and HALO level-0 E4M3 codes ARE the file's codes, bit
//    for bit, under the file's scale (the folders' codes stay below 448, so a requantization with
//    amax/448 would give other codes and fail these tests);
//  - block or per-channel scales: FALQON requantizes per tensor from the exact fp32 values (a
//    weight that is a single block has one scale: per tensor);
//  - LoRA holds decode(code) x scale exactly (F32 on the CPU).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/io/safetensors_reader.h"
#include "engine/methods/falqon/falqon_linear.h"
#include "engine/peft/halo_weight.h"
#include "engine/peft/lora_linear.h"
#include "engine/peft/method.h"
#include "engine/quant/fp8.h"
#include "models/llama/loading.h"
#include "tests/common/fp8_folder.h"
#include "tests/common/test_util.h"

namespace loft::llama {
namespace {

namespace fs = std::filesystem;
using test::Fp8Layout;

std::unique_ptr<LlamaModel> build(const fs::path& dir, MethodOptions m) {
  m.targets = parse_lora_targets("all");
  m.lora = {8, 16.0f};
  apply_method_invariants(m);
  static std::mt19937_64 rng(3);
  return load_model(dir, Device::cpu(), make_linear_factory(m, rng));
}

// Per-tensor folder: codes up to 0x77 (240), so the file's scale is not amax/448.
test::Fp8Folder per_tensor(const fs::path& dir, DType scale_dtype = DType::F32) {
  test::Fp8FolderOptions o;
  o.layout = Fp8Layout::CtTensor;
  o.max_code = 0x77;
  o.scale_dtype = scale_dtype;
  return test::write_fp8_folder(dir, o);
}

float file_scale(const test::Fp8Folder& f, const std::string& weight) {
  return f.tensors.at(weight + "_scale").to_float_vector()[0];
}

// decode(code) x s for every code of `codes` (the expected frozen values).
std::vector<float> decoded(const Tensor& codes, float s) {
  std::vector<float> v(size_t(codes.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = fp8_e4m3_to_f32(codes.ptr<uint8_t>()[i]) * s;
  return v;
}

TEST(Fp8Methods, FalqonTakesPerTensorCodesBitForBit) {
  for (const DType scale_dtype : {DType::F32, DType::BF16}) {
    test::TempDir dir;
    const auto f = per_tensor(dir.path(), scale_dtype);
    MethodOptions m;
    m.method = "falqon";
    auto model = build(dir.path(), m);
    int n = 0;
    for (const auto& [module, lin] : model->linears()) {
      auto* fl = dynamic_cast<FalqonLinear*>(lin);
      ASSERT_NE(fl, nullptr) << module;
      const Tensor& codes = f.tensors.at(module + ".weight");
      const int64_t out = codes.size(0), in = codes.size(1);
      const Tensor melded = fl->melded_codes();
      EXPECT_EQ(std::memcmp(melded.data(), codes.data(), size_t(out * in)), 0) << module;
      const Tensor t = fl->transposed_codes();
      for (int64_t i = 0; i < out; ++i)
        for (int64_t j = 0; j < in; ++j)
          ASSERT_EQ(t.ptr<uint8_t>()[j * out + i], codes.ptr<uint8_t>()[i * in + j]) << module;
      EXPECT_EQ(quant::float_bits(fl->weight_scale()), quant::float_bits(file_scale(f, module + ".weight")))
          << module;
      EXPECT_EQ(fl->merged_weight().to_float_vector(), decoded(codes, fl->weight_scale())) << module;
      ++n;
    }
    EXPECT_EQ(n, 2 * 7);
  }
}

TEST(Fp8Methods, FalqonOnAnExactBaseStartsALikeLoraAndTrains) {
  // No quantization error: Â cannot come from it; it starts Kaiming-uniform and B̂ = 0, and the
  // first backward gives B a gradient (with Â = 0 it never would).
  test::TempDir dir;
  per_tensor(dir.path());
  MethodOptions m;
  m.method = "falqon";
  auto model = build(dir.path(), m);
  auto* fl = dynamic_cast<FalqonLinear*>(model->linears()[0].second);
  ASSERT_NE(fl, nullptr);
  const auto [a, b] = *fl->peft_pair();
  const float bound = 1.0f / std::sqrt(float(fl->in_features()));
  double a_norm = 0;
  for (float v : a.to_float_vector()) {
    EXPECT_LE(std::fabs(v), bound);
    a_norm += double(v) * v;
  }
  EXPECT_GT(a_norm, 0.0);
  for (float v : b.to_float_vector()) ASSERT_EQ(v, 0.0f) << "B̂ = 0: E is zero";
  std::mt19937 g(9);
  const Tensor x = test::random_tensor({16, fl->in_features()}, g);
  Tensor y = Tensor::empty({16, fl->out_features()}, DType::F32);
  Tensor dx = Tensor::empty({16, fl->in_features()}, DType::F32);
  LinearSaved saved;
  fl->forward(x, y, &saved);
  fl->backward(test::random_tensor({16, fl->out_features()}, g), saved, dx, false);
  double grad = 0;
  for (float v : fl->buffer().grad.to_float_vector()) grad += std::fabs(v);
  EXPECT_GT(grad, 0.0);
}

TEST(Fp8Methods, FalqonRequantizesBlockAndChannelScalesFromExactValues) {
  for (const Fp8Layout layout : {Fp8Layout::TransformersBlock, Fp8Layout::CtChannel}) {
    test::TempDir dir;
    test::Fp8FolderOptions o;
    o.layout = layout;
    const auto f = test::write_fp8_folder(dir.path(), o);
    MethodOptions m;
    m.method = "falqon";
    auto model = build(dir.path(), m);
    int direct = 0, requantized = 0;
    for (const auto& [module, lin] : model->linears()) {
      auto* fl = dynamic_cast<FalqonLinear*>(lin);
      ASSERT_NE(fl, nullptr);
      const Tensor& codes = f.tensors.at(module + ".weight");
      const bool block = layout == Fp8Layout::TransformersBlock;
      const Tensor& scales = f.tensors.at(module + (block ? ".weight_scale_inv" : ".weight_scale"));
      const Tensor exact = Tensor::from_vector(
          test::fp8_reference_values(codes, scales, block ? 128 : 1, block ? 128 : 0), codes.shape());
      double b_hat = 0;
      for (float v : fl->peft_pair()->second.to_float_vector()) b_hat += std::fabs(v);
      if (scales.numel() == 1) {  // hidden 72 < 128: q, k, v, o are one block, a per-tensor scale
        EXPECT_EQ(std::memcmp(fl->melded_codes().data(), codes.data(), codes.nbytes()), 0) << module;
        EXPECT_EQ(fl->weight_scale(), scales.to_float_vector()[0]) << module;
        EXPECT_EQ(b_hat, 0.0) << module;
        ++direct;
        continue;
      }
      const quant::QuantizedTensor q = quant::quantize(exact, quant::LowpFormat::E4M3);
      EXPECT_EQ(fl->weight_scale(), q.scale.ptr<float>()[0]) << module;
      EXPECT_EQ(std::memcmp(fl->melded_codes().data(), q.codes.data(), q.codes.nbytes()), 0) << module;
      EXPECT_GT(b_hat, 0.0) << "Â and B̂ from the requantization error";
      ++requantized;
    }
    EXPECT_EQ(direct, layout == Fp8Layout::TransformersBlock ? 2 * 4 : 0);
    EXPECT_EQ(requantized, layout == Fp8Layout::TransformersBlock ? 2 * 3 : 2 * 7);
  }
}

TEST(Fp8Methods, LoraHoldsTheExactValues) {
  test::TempDir dir;
  test::write_fp8_folder(dir.path());
  const auto file = SafetensorsReader::open(dir / "model.safetensors");
  auto model = build(dir.path(), MethodOptions{});
  const auto& [module, lin] = model->linears()[4];  // layer 0 gate_proj [200, 72]: 2 x 1 blocks
  ASSERT_EQ(module, "model.layers.0.mlp.gate_proj");
  const Tensor codes = file.tensor(module + ".weight");
  const std::vector<float> s = file.tensor(module + ".weight_scale_inv").to_float_vector();
  const std::vector<float> w = lin->merged_weight().to_float_vector();  // B = 0: W itself
  for (int64_t i = 0; i < 200; ++i)
    for (int64_t j = 0; j < 72; ++j)
      ASSERT_EQ(w[size_t(i * 72 + j)], fp8_e4m3_to_f32(codes.ptr<uint8_t>()[i * 72 + j]) * s[size_t(i / 128)]);
}

TEST(Fp8Methods, HaloLevel0TakesPerTensorCodes) {
  test::TempDir dir;
  const auto f = per_tensor(dir.path());
  MethodOptions m;
  m.method = "halo";
  m.get<HaloOptions>().level = 0;
  auto model = build(dir.path(), m);
  for (const auto& [module, lin] : model->linears()) {
    ASSERT_NE(dynamic_cast<LoraLinear*>(lin), nullptr);
    const Tensor& codes = f.tensors.at(module + ".weight");
    // B = 0, so the merged weight is HALO's frozen deq(codes) x scale, one multiply per code.
    EXPECT_EQ(lin->merged_weight().to_float_vector(), decoded(codes, file_scale(f, module + ".weight")))
        << module;
  }
  // Level 1 rotates the exact values first: the codes are not the file's, the weight near them.
  m.get<HaloOptions>().level = 1;
  auto rotated = build(dir.path(), m);
  const auto& [module, lin] = rotated->linears()[0];
  const std::vector<float> want = decoded(f.tensors.at(module + ".weight"), file_scale(f, module + ".weight"));
  const std::vector<float> got = lin->merged_weight().to_float_vector();
  EXPECT_NE(got, want);
  EXPECT_LT(test::rel_error(got, want), 0.05);
}

}  // namespace
}  // namespace loft::llama
