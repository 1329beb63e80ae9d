// What an FP8 checkpoint loft cannot read correctly does: one line naming the file and the tensor
// (or config.json and the field), never a crash or a silently misread weight.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "engine/peft/method.h"
#include "models/llama/loading.h"
#include "tests/common/fp8_folder.h"
#include "tests/common/test_util.h"

namespace loft::llama {
namespace {

using nlohmann::json;
using test::Fp8Layout;

const std::string kGate = "model.layers.1.mlp.gate_proj.weight";

// A written folder, edited by each test, and the one error loading it gives.
struct Folder {
  test::TempDir dir;
  test::Fp8Folder f;
  explicit Folder(Fp8Layout layout = Fp8Layout::TransformersBlock) {
    test::Fp8FolderOptions o;
    o.layout = layout;
    f = test::write_fp8_folder(dir.path(), o);
  }
  void edit_config(const std::function<void(json&)>& change) {
    json j = json::parse(f.config);
    change(j["quantization_config"]);
    f.config = j.dump();
  }
  // The message of the Error that building a model throws (a LoRA model on the CPU).
  std::string error() {
    f.write(dir.path());
    std::mt19937_64 rng(0);
    try {
      MethodOptions m;
      m.targets = parse_lora_targets("all");
      load_model(dir.path(), Device::cpu(), make_linear_factory(m, rng));
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
      return e.what();
    }
    ADD_FAILURE() << "loaded";
    return "";
  }
  std::string file() const { return (dir / "model.safetensors").string(); }
  std::string config() const { return (dir / "config.json").string(); }
};

TEST(Fp8Errors, MissingScale) {
  Folder d;
  d.f.tensors.erase(kGate + "_scale_inv");
  const std::string msg = d.error();
  EXPECT_TRUE(test::contains(msg, d.file() + ": tensor " + kGate + " is F8_E4M3"));
  EXPECT_TRUE(test::contains(msg, kGate + "_scale_inv is missing"));
}

TEST(Fp8Errors, ScaleOfTheWrongShape) {
  Folder d;  // gate [200, 72] in 128-blocks: a 2 x 1 grid
  d.f.tensors[kGate + "_scale_inv"] = Tensor::zeros({2, 2}, DType::F32);
  std::string msg = d.error();
  EXPECT_TRUE(test::contains(msg, d.file() + ": tensor " + kGate + "_scale_inv has shape [2, 2], expected [2, 1]"));
  Folder channel(Fp8Layout::CtChannel);  // per channel: [out, 1], not [out]
  channel.f.tensors[kGate + "_scale"] = Tensor::zeros({200}, DType::F32);
  msg = channel.error();
  EXPECT_TRUE(test::contains(msg, kGate + "_scale has shape [200], expected [200, 1]"));
  Folder tensor(Fp8Layout::CtTensor);
  tensor.f.tensors[kGate + "_scale"] = Tensor::zeros({2}, DType::F32);
  EXPECT_TRUE(test::contains(tensor.error(), kGate + "_scale has shape [2], expected [1]"));
}

TEST(Fp8Errors, ScaleOfTheWrongDtype) {
  Folder d;
  d.f.tensors[kGate + "_scale_inv"] = Tensor::zeros({2, 1}, DType::I32);
  EXPECT_TRUE(test::contains(d.error(), kGate + "_scale_inv is I32, expected F32"));
}

TEST(Fp8Errors, NonFiniteOrNegativeScale) {
  for (const float bad : {INFINITY, NAN, -1e-3f}) {
    Folder d;
    d.f.tensors[kGate + "_scale_inv"] = Tensor::from_vector(std::vector<float>{1e-3f, bad}, {2, 1});
    const std::string msg = d.error();
    EXPECT_TRUE(test::contains(msg, d.file() + ": tensor " + kGate + "_scale_inv holds"));
    EXPECT_TRUE(test::contains(msg, "at index 1; scales must be finite and >= 0"));
  }
}

TEST(Fp8Errors, UnknownQuantMethod) {
  Folder d;
  d.edit_config([](json& q) { q["quant_method"] = "gptq"; });
  const std::string msg = d.error();
  EXPECT_TRUE(test::contains(msg, d.config() + ": field quantization_config.quant_method is 'gptq'"));
  EXPECT_TRUE(test::contains(msg, "not supported"));
}

TEST(Fp8Errors, UnsupportedBlockSize) {
  for (const json& bad : {json::array({128}), json::array({0, 128}), json(nullptr), json("128")}) {
    Folder d;
    d.edit_config([&](json& q) { q["weight_block_size"] = bad; });
    const std::string msg = d.error();
    EXPECT_TRUE(test::contains(msg, d.config() + ": field quantization_config.weight_block_size"));
    EXPECT_TRUE(test::contains(msg, "block size is not supported"));
  }
}

TEST(Fp8Errors, CompressedTensorsFormatsNotRead) {
  struct Case {
    std::function<void(json&)> change;
    std::string field, says;
  };
  const std::vector<Case> cases{
      {[](json& q) { q["format"] = "pack-quantized"; }, "format", "'pack-quantized' (int4/int8 weights packed into int32): not supported"},
      {[](json& q) { q["format"] = "int-quantized"; }, "format", "not supported"},
      {[](json& q) { q["config_groups"]["group_0"]["weights"]["type"] = "int"; }, "config_groups.group_0.weights", "8-bit int: not supported"},
      {[](json& q) { q["config_groups"]["group_0"]["weights"]["num_bits"] = 4; }, "config_groups.group_0.weights", "4-bit float: not supported"},
      {[](json& q) { q["config_groups"]["group_0"]["weights"] = nullptr; }, "config_groups.group_0.weights", "activation-only quantization is not supported"},
      {[](json& q) { q["config_groups"]["group_0"]["weights"]["strategy"] = "group"; }, "config_groups.group_0.weights.strategy", "'group': not supported"},
      {[](json& q) { q["config_groups"]["group_0"]["weights"]["symmetric"] = false; }, "config_groups.group_0.weights.symmetric", "asymmetric"},
      {[](json& q) { q["sparsity_config"] = {{"format", "sparse-bitmask"}}; }, "sparsity_config", "sparse weights are not supported"},
  };
  for (const Case& c : cases) {
    Folder d(Fp8Layout::CtTensor);
    d.edit_config(c.change);
    const std::string msg = d.error();
    EXPECT_TRUE(test::contains(msg, d.config() + ": field quantization_config." + c.field + " "));
    EXPECT_TRUE(test::contains(msg, c.says));
  }
}

TEST(Fp8Errors, WeightsStoredOtherwiseThanTheConfigSays) {
  {  // E5M2 codes
    Folder d;
    Tensor& w = d.f.tensors[kGate];
    w = Tensor::from_host(w.data(), w.shape(), DType::F8_E5M2);
    EXPECT_TRUE(test::contains(d.error(), d.file() + ": tensor " + kGate + " is F8_E5M2"));
  }
  {  // a scale beside a dense weight
    Folder d(Fp8Layout::CtChannel);
    d.f.tensors["lm_head.weight_scale"] = Tensor::zeros({64, 1}, DType::F32);
    EXPECT_TRUE(test::contains(d.error(), "tensor lm_head.weight is BF16 but has a scale lm_head.weight_scale"));
  }
  {  // an asymmetric zero point
    Folder d(Fp8Layout::CtTensor);
    d.f.tensors["model.layers.1.mlp.gate_proj.weight_zero_point"] = Tensor::from_vector(std::vector<float>{0.5f}, {1});
    EXPECT_TRUE(test::contains(d.error(), "model.layers.1.mlp.gate_proj.weight_zero_point is a nonzero zero point"));
    d.f.tensors["model.layers.1.mlp.gate_proj.weight_zero_point"] = Tensor::zeros({1}, DType::I8);
    d.f.write(d.dir.path());
    std::mt19937_64 rng(0);
    EXPECT_NO_THROW(load_model(d.dir.path(), Device::cpu(), make_linear_factory({}, rng))) << "a zero zero point is fine";
  }
}

}  // namespace
}  // namespace loft::llama
