// FP8 checkpoints as a base model on the GPU: LoRA holds the exact values rounded once to bf16,
// FALQON and HALO level 0 take a per-tensor checkpoint's codes bit for bit, FALQON requantizes
// block scales from the exact fp32 values to the same codes as the CPU, and finetune runs on the
// transformers FP8 reference with lora and falqon.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/io/safetensors_reader.h"
#include "engine/methods/falqon/falqon_linear.h"
#include "engine/peft/halo_weight.h"
#include "engine/peft/method.h"
#include "models/llama/loading.h"
#include "tests/common/cli_capture.h"
#include "tests/common/every_method.h"
#include "tests/common/fp8_folder.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

fs::path reference() { return test::data_path("reference/fp8-block-transformers"); }

std::unique_ptr<llama::LlamaModel> build(const fs::path& dir, Device device, MethodOptions m) {
  m.targets = parse_lora_targets("all");
  m.lora = {8, 16.0f};
  apply_method_invariants(m);
  static std::mt19937_64 rng(3);
  return llama::load_model(dir, device, make_linear_factory(m, rng));
}

TEST(Fp8BaseCuda, LoraHoldsTheExactValuesInBf16) {
  LOFT_REQUIRE_GPU();
  auto model = build(reference(), Device::cuda(0), MethodOptions{});
  const auto file = SafetensorsReader::open(reference() / "model.safetensors");
  for (const auto& [module, lin] : model->linears()) {
    const std::vector<float> exact = test::fp8_reference_values(
        file.tensor(module + ".weight"), file.tensor(module + ".weight_scale_inv"), 128, 128);
    const std::vector<float> got = lin->merged_weight().to_float_vector();  // B = 0
    ASSERT_EQ(got.size(), exact.size());
    for (size_t i = 0; i < exact.size(); ++i)
      ASSERT_EQ(got[i], bf16_to_f32(f32_to_bf16(exact[i]))) << module << " element " << i;
  }
}

TEST(Fp8BaseCuda, FalqonAndHaloTakePerTensorCodes) {
  LOFT_REQUIRE_GPU();
  test::TempDir dir;
  test::Fp8FolderOptions o;
  o.layout = test::Fp8Layout::CtTensor;
  o.max_code = 0x77;  // the file's scale is not amax/448: a requantization would differ
  const auto f = test::write_fp8_folder(dir.path(), o);
  MethodOptions falqon;
  falqon.method = "falqon";
  auto model = build(dir.path(), Device::cuda(0), falqon);
  for (const auto& [module, lin] : model->linears()) {
    auto* fl = dynamic_cast<FalqonLinear*>(lin);
    ASSERT_NE(fl, nullptr);
    const Tensor& codes = f.tensors.at(module + ".weight");
    EXPECT_EQ(std::memcmp(fl->melded_codes().data(), codes.data(), codes.nbytes()), 0) << module;
    EXPECT_EQ(fl->weight_scale(), f.tensors.at(module + ".weight_scale").to_float_vector()[0]);
  }
  MethodOptions halo;
  halo.method = "halo";
  halo.get<HaloOptions>().level = 0;
  auto h = build(dir.path(), Device::cuda(0), halo);
  for (const auto& [module, lin] : h->linears()) {
    const std::vector<float> want = test::fp8_reference_values(
        f.tensors.at(module + ".weight"), f.tensors.at(module + ".weight_scale"), 0, 0);
    // HALO's frozen weight in bf16 (the compute dtype): decode x scale, rounded once.
    const std::vector<float> got = lin->merged_weight().to_float_vector();
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], bf16_to_f32(f32_to_bf16(want[i]))) << module << " element " << i;
  }
}

TEST(Fp8BaseCuda, FalqonRequantizesBlockScalesAsTheCpuDoes) {
  LOFT_REQUIRE_GPU();
  MethodOptions m;
  m.method = "falqon";
  auto gpu = build(reference(), Device::cuda(0), m);
  auto cpu = build(reference(), Device::cpu(), m);
  for (size_t i = 0; i < gpu->linears().size(); ++i) {
    auto* g = dynamic_cast<FalqonLinear*>(gpu->linears()[i].second);
    auto* c = dynamic_cast<FalqonLinear*>(cpu->linears()[i].second);
    ASSERT_TRUE(g && c);
    const Tensor gc = g->melded_codes(), cc = c->melded_codes();
    const size_t backbone = size_t(g->out_features() * g->in_features());
    EXPECT_EQ(std::memcmp(gc.data(), cc.data(), backbone), 0) << gpu->linears()[i].first;
    EXPECT_EQ(g->weight_scale(), c->weight_scale()) << gpu->linears()[i].first;
  }
}

TEST(Fp8BaseCuda, FinetuneTheReferenceWithLoraAndFalqon) {
  LOFT_REQUIRE_GPU();
  test::TempDir dir;
  const fs::path model = dir / "model";
  fs::create_directory(model);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
    fs::copy_file(reference() / f, model / f);
  fs::copy_file(test::data_path("models/wide-random/tokenizer.model"), model / "tokenizer.model");
  const fs::path demo = test::source_dir() / "examples" / "demo.jsonl";
  for (const std::string& method : test::one_method_per_update_kind()) {
    const auto r = test::run_cli_captured({"finetune", "--model", model.string(), "--data",
                                           demo.string(), "--out", (dir / method).string(),
                                           "--method", method, "--steps", "4", "--batch", "4",
                                           "--seq", "128", "--lora-rank", "8", "--device", "cuda"});
    ASSERT_EQ(r.code, 0) << method << ": " << r.err;
    std::ifstream metrics(dir / method / "metrics.jsonl");
    int n = 0;
    for (std::string line; std::getline(metrics, line); ++n)
      EXPECT_TRUE(std::isfinite(nlohmann::json::parse(line)["loss"].get<double>())) << method;
    EXPECT_EQ(n, 4) << method;
  }
}

}  // namespace
}  // namespace loft
