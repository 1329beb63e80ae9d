// FP8 checkpoints through the real CLI: `loft info` names the quantization, and `finetune` trains
// on the transformers FP8 reference (with the tok512 tokenizer beside it, the reference folder has
// none) with LoRA and FALQON, and FALQON on a per-tensor compressed-tensors base whose codes it
// takes as they are.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/peft/peft_adapter.h"
#include "tests/common/cli_capture.h"
#include "tests/common/fp8_folder.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

fs::path reference() { return test::data_path("reference/fp8-block-transformers"); }

// The demo set that ships with the project (examples/).
std::string demo() {
  const fs::path here = test::source_dir();
  return (here / "examples" / "demo.jsonl").string();
}

// `dir` with the tok512 tokenizer copied in (vocab 512, as the FP8 models have).
void add_tokenizer(const fs::path& dir) {
  fs::copy_file(test::data_path("models/stories260K-hf/tokenizer.model"), dir / "tokenizer.model");
}

std::vector<double> losses(const fs::path& run) {
  std::ifstream f(run / "metrics.jsonl");
  std::vector<double> out;
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  return out;
}

test::CliResult finetune(const fs::path& model, const fs::path& out, const std::string& method,
                         int steps, const std::string& lr) {
  return test::run_cli_captured({"finetune", "--model", model.string(), "--data", demo(), "--out",
                                 out.string(), "--method", method, "--steps", std::to_string(steps),
                                 "--batch", "4", "--seq", "128", "--lora-rank", "8", "--device",
                                 "cpu", "--seed", "5", "--lr", lr});
}

double mean_of_last(const std::vector<double>& l, size_t n) {
  double s = 0;
  for (size_t i = l.size() - n; i < l.size(); ++i) s += l[i];
  return s / double(n);
}

// FALQON learns slowly on these tiny random models and batch-to-batch noise is large, so a run is
// compared with one over the same batches at a negligible lr: the last steps' mean loss is lower.
void expect_falqon_learns(const fs::path& model, const fs::path& runs) {
  const auto r = finetune(model, runs / "falqon", "falqon", 8, "3e-2");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto still = finetune(model, runs / "still", "falqon", 8, "1e-12");
  ASSERT_EQ(still.code, 0) << still.err;
  const std::vector<double> l = losses(runs / "falqon"), base = losses(runs / "still");
  ASSERT_EQ(l.size(), 8u);
  ASSERT_EQ(base.size(), 8u);
  EXPECT_EQ(l.front(), base.front()) << "the same first batch on the same model";
  EXPECT_LT(mean_of_last(l, 4), mean_of_last(base, 4) - 0.05)
      << "trained " << mean_of_last(l, 4) << " vs untrained " << mean_of_last(base, 4);
}

TEST(Fp8Base, InfoNamesTheQuantization) {
  auto r = test::run_cli_captured({"info", "--model", reference().string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "weights       fp8 e4m3, block 128x128 (transformers fp8)\n"));
  EXPECT_TRUE(test::contains(r.out, "F8_E4M3"));

  r = test::run_cli_captured({"info", "--model", reference().string(), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto q = nlohmann::json::parse(r.out)["quantization"];
  EXPECT_EQ(q["method"], "fp8");
  EXPECT_EQ(q["weights"], "e4m3");
  EXPECT_EQ(q["granularity"], "block");
  EXPECT_EQ(q["block"], nlohmann::json::array({128, 128}));
  EXPECT_EQ(q["scale_tensor"], "weight_scale_inv");
  EXPECT_EQ(q["description"], "fp8 e4m3, block 128x128 (transformers fp8)");

  test::TempDir dir;
  test::Fp8FolderOptions o;
  o.layout = test::Fp8Layout::CtChannel;
  test::write_fp8_folder(dir.path(), o);
  r = test::run_cli_captured({"info", "--model", dir.path().string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(
      r.out, "weights       fp8 e4m3, per-channel (compressed-tensors float-quantized); not quantized: lm_head\n"));
  r = test::run_cli_captured({"info", "--model", dir.path().string(), "--json"});
  const auto ct = nlohmann::json::parse(r.out)["quantization"];
  EXPECT_EQ(ct["granularity"], "channel");
  EXPECT_EQ(ct["not_quantized"], nlohmann::json::array({"lm_head"}));

  r = test::run_cli_captured({"info", "--model", test::data_path("models/stories260K-hf").string(), "--json"});
  EXPECT_TRUE(nlohmann::json::parse(r.out)["quantization"].is_null()) << "an unquantized (fp32) checkpoint";
}

TEST(Fp8Base, FinetuneTheTransformersReferenceWithLoraAndFalqon) {
  test::TempDir dir;
  const fs::path model = dir / "model";
  fs::create_directory(model);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
    fs::copy_file(reference() / f, model / f);
  add_tokenizer(model);
  const auto r = finetune(model, dir / "lora", "lora", 6, "3e-3");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<double> l = losses(dir / "lora");
  ASSERT_EQ(l.size(), 6u);
  EXPECT_LT(l.back(), l.front() - 0.3) << "loss did not fall: " << l.front() << " -> " << l.back();
  EXPECT_EQ(load_peft_adapter(dir / "lora" / "adapter").modules.size(), 2u * 7u);
  expect_falqon_learns(model, dir.path());
}

TEST(Fp8Base, FalqonTrainsOnAPerTensorBase) {
  // Per-tensor codes are taken bit for bit, so no quantization error seeds Â (engine/peft/
  // falqon_linear.cpp); it must train all the same.
  test::TempDir dir;
  test::Fp8FolderOptions o;
  o.layout = test::Fp8Layout::CtTensor;
  o.vocab = 512;
  o.hidden = 64;
  o.ffn = 160;
  test::write_fp8_folder(dir.path(), o);
  add_tokenizer(dir.path());
  expect_falqon_learns(dir.path(), dir.path());
}

}  // namespace
}  // namespace loft
