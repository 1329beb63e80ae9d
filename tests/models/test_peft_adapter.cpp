// PEFT adapters: the one PEFT itself saved (golden/adapter_stories260K) loads, holds the golden
// initial tensors, and on the model reproduces PyTorch's logits; loft's own adapters round-trip;
// PEFT features loft does not implement are refused by name.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/io/safetensors_reader.h"
#include "engine/io/safetensors_writer.h"
#include "engine/peft/peft_adapter.h"
#include "models/llama/loading.h"
#include "tests/common/golden.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

fs::path golden_adapter() { return test::data_path("golden/adapter_stories260K"); }

TEST(PeftAdapter, LoadsTheAdapterPeftSaved) {
  const PeftAdapter a = load_peft_adapter(golden_adapter());
  EXPECT_EQ(a.rank, 8);
  EXPECT_EQ(a.alpha, 16.0f);
  EXPECT_EQ(a.target_modules.size(), 7u);
  ASSERT_EQ(a.modules.size(), 5u * 7u);
  const auto golden = SafetensorsReader::open(test::data_path("golden/golden_stories260K.safetensors"));
  for (const auto& [module, ab] : a.modules) {
    const std::string base = "init/base_model.model." + module;
    EXPECT_EQ(test::rel_error(ab.first, golden.tensor(base + ".lora_A.default.weight")), 0.0) << module;
    EXPECT_EQ(test::rel_error(ab.second, golden.tensor(base + ".lora_B.default.weight")), 0.0) << module;
  }
}

TEST(PeftAdapter, PeftMadeAdapterHasNoRecordAndLoadsAsLora) {
  PeftAdapter a = load_peft_adapter(golden_adapter());
  EXPECT_FALSE(a.method.has_value());
  EXPECT_TRUE(a.method_state.empty());
  const MethodOptions m = llama::method_options_for(a);
  EXPECT_EQ(m.method, "lora");
  EXPECT_EQ(m.lora.rank, 8);
  EXPECT_EQ(m.lora.alpha, 16.0f);
  EXPECT_EQ(m.targets, parse_lora_targets("all"));
  // An explicit --method equal to the (implied) one needs no note.
  std::ostringstream note;
  EXPECT_EQ(llama::method_options_for(a, "lora", golden_adapter(), note).method, "lora");
  EXPECT_TRUE(note.str().empty());
}

TEST(PeftAdapter, AppliedToTheModelReproducesPyTorchLogits) {
  const PeftAdapter a = load_peft_adapter(golden_adapter());
  std::mt19937_64 rng(0);
  auto model = llama::load_model(test::data_path("models/stories260K-hf"), Device::cpu(),
                                 make_linear_factory(llama::method_options_for(a), rng));
  llama::apply_adapter(*model, a, golden_adapter());
  const auto golden = SafetensorsReader::open(test::data_path("golden/golden_stories260K.safetensors"));
  const Tensor ids = golden.tensor("input_ids");
  std::vector<int32_t> id32;
  for (int64_t v : ids.to_int_vector()) id32.push_back(int32_t(v));
  const ModelBatch b = make_batch(id32, id32, {}, ids.size(0), ids.size(1), Device::cpu());
  EXPECT_LT(test::rel_error(model->logits(b), golden.tensor("logits")), 1e-4);
}

TEST(PeftAdapter, SaveLoadRoundTrip) {
  test::TempDir dir;
  const PeftAdapter a = load_peft_adapter(golden_adapter());
  PeftAdapter b = a;
  b.method = llama::method_options_for(a);
  save_peft_adapter(dir / "out", b);
  const PeftAdapter c = load_peft_adapter(dir / "out");
  EXPECT_EQ(c.rank, a.rank);
  EXPECT_EQ(c.alpha, a.alpha);
  ASSERT_TRUE(c.method.has_value());
  EXPECT_EQ(c.method->method, "lora");
  EXPECT_EQ(c.method->targets.size(), 7u);
  ASSERT_EQ(c.modules.size(), a.modules.size());
  for (const auto& [m, ab] : a.modules) {
    EXPECT_EQ(test::rel_error(c.modules.at(m).first, ab.first), 0.0);
    EXPECT_EQ(test::rel_error(c.modules.at(m).second, ab.second), 0.0);
  }
  // PEFT's own names: base_model.model.<module>.lora_A.weight, no adapter name.
  const auto f = SafetensorsReader::open(dir / "out" / "adapter_model.safetensors");
  EXPECT_TRUE(f.contains("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"));
}

void write_config(const fs::path& dir, const nlohmann::json& j) {
  fs::create_directories(dir);
  std::ofstream(dir / "adapter_config.json") << j.dump();
}

TEST(PeftAdapter, RefusesWhatLoftDoesNotImplement) {
  test::TempDir dir;
  const nlohmann::json ok = {{"peft_type", "LORA"}, {"r", 8}, {"lora_alpha", 16},
                             {"target_modules", {"q_proj"}}};
  fs::copy_file(golden_adapter() / "adapter_model.safetensors", dir / "tensors.safetensors");
  for (auto [key, value] : {std::pair<std::string, nlohmann::json>{"use_dora", true},
                            {"use_rslora", true},
                            {"bias", "all"},
                            {"peft_type", "IA3"}}) {
    auto j = ok;
    j[key] = value;
    const fs::path d = dir / key;
    write_config(d, j);
    fs::copy_file(dir / "tensors.safetensors", d / "adapter_model.safetensors");
    try {
      load_peft_adapter(d);
      ADD_FAILURE() << key << " was accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(test::contains(e.what(), key == "peft_type" ? "IA3" : key)) << e.what();
    }
  }
  auto j = ok;
  j.erase("r");
  write_config(dir / "no_r", j);
  try {
    load_peft_adapter(dir / "no_r");
    ADD_FAILURE() << "missing r accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "field r is missing")) << e.what();
  }
}

TEST(PeftAdapter, AOnlyModuleIsNamed) {
  test::TempDir dir;
  write_config(dir / "a", {{"peft_type", "LORA"}, {"r", 2}, {"lora_alpha", 4}, {"target_modules", {"q_proj"}}});
  write_safetensors(dir / "a" / "adapter_model.safetensors",
                    {{"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
                      Tensor::zeros({2, 64}, DType::F32)}});
  try {
    load_peft_adapter(dir / "a");
    ADD_FAILURE() << "A without B accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "model.layers.0.self_attn.q_proj has lora_A but no lora_B"));
  }
}

TEST(PeftAdapter, ModelAdaptingAModuleTheAdapterLacksIsNamed) {
  PeftAdapter a = load_peft_adapter(golden_adapter());
  a.modules.erase("model.layers.2.mlp.up_proj");
  std::mt19937_64 rng(0);
  auto model = llama::load_model(test::data_path("models/stories260K-hf"), Device::cpu(),
                                 make_linear_factory(llama::method_options_for(a), rng));
  try {
    llama::apply_adapter(*model, a, "x");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "model.layers.2.mlp.up_proj")) << e.what();
  }
}

}  // namespace
}  // namespace loft
