// The method record ("loft" in adapter_config.json): every MethodOptions field round-trips, in
// memory and through an adapter folder; PEFT's own fields are checked against it; each bad field
// is refused with one line naming the file and the field; method state round-trips through
// loft_state.safetensors and a stale one is not left behind.
#include <fstream>

#include "engine/io/safetensors_writer.h"
#include "engine/peft/halo_weight.h"
#include "engine/peft/method_record.h"
#include "engine/peft/method_state.h"
#include "engine/peft/peft_adapter.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

void expect_same(const MethodOptions& a, const MethodOptions& b, const std::string& what) {
  EXPECT_EQ(a.method, b.method) << what;
  EXPECT_EQ(a.lora.rank, b.lora.rank) << what;
  EXPECT_EQ(a.lora.alpha, b.lora.alpha) << what;
  EXPECT_EQ(a.targets, b.targets) << what;
  EXPECT_EQ(a.get<HaloOptions>().level, b.get<HaloOptions>().level) << what;
  EXPECT_EQ(a.get<HaloOptions>().format, b.get<HaloOptions>().format) << what;
}

std::vector<MethodOptions> every_option() {
  std::vector<MethodOptions> out;
  const std::vector<std::set<std::string>> targets = {
      parse_lora_targets("all"), {"q_proj"}, {"k_proj", "down_proj", "up_proj"}};
  for (const std::string& method : method_names())
    for (auto [rank, alpha] : {std::pair{1, 0.5f}, {16, 8.0f}, {172, 3.25f}})
      for (const auto& t : targets) {
        MethodOptions m;
        m.method = method;
        m.lora = {rank, alpha};
        m.targets = t;
        if (method != "halo") {
          out.push_back(m);
          continue;
        }
        for (int level : {0, 1, 2})
          for (auto f : {quant::LowpFormat::E4M3, quant::LowpFormat::INT8}) {
            m.get<HaloOptions>() = {level, f};
            out.push_back(m);
          }
      }
  return out;
}

TEST(MethodRecord, EveryOptionRoundTrips) {
  for (const MethodOptions& m : every_option()) {
    const nlohmann::json j = method_options_to_json(m);
    EXPECT_EQ(j["format_version"], kMethodRecordVersion);
    // Through text, as on disk.
    const MethodOptions back =
        method_options_from_json(nlohmann::json::parse(j.dump()), "cfg.json");
    expect_same(back, m, j.dump());
  }
}

PeftAdapter small_adapter(const MethodOptions& m) {
  PeftAdapter a;
  a.rank = m.lora.rank;
  a.alpha = m.lora.alpha;
  a.target_modules.assign(m.targets.begin(), m.targets.end());
  a.method = m;
  std::mt19937 rng(3);
  a.modules["model.layers.0.self_attn.q_proj"] = {test::random_tensor({m.lora.rank, 6}, rng),
                                                  test::random_tensor({5, m.lora.rank}, rng)};
  return a;
}

PeftAdapter small_lora_adapter() {
  MethodOptions m;
  m.lora = {2, 4.0f};
  m.targets = {"q_proj"};
  return small_adapter(m);
}

TEST(MethodRecord, RoundTripsThroughAnAdapterFolder) {
  test::TempDir dir;
  for (const MethodOptions& m : every_option()) {
    save_peft_adapter(dir / "a", small_adapter(m));
    const PeftAdapter back = load_peft_adapter(dir / "a");
    ASSERT_TRUE(back.method.has_value());
    expect_same(*back.method, m, method_options_to_json(m).dump());
  }
}

TEST(MethodRecord, MethodStateRoundTripsAndStaleStateIsRemoved) {
  test::TempDir dir;
  PeftAdapter a = small_lora_adapter();
  std::mt19937 rng(5);
  a.method_state["model.layers.0.self_attn.q_proj.rows"] = test::random_tensor({3, 6}, rng);
  a.method_state["model.layers.0.self_attn.q_proj.sum"] = test::random_tensor({5, 2}, rng);
  save_peft_adapter(dir / "a", a);
  ASSERT_TRUE(fs::exists(dir / "a" / kMethodStateFile));
  const PeftAdapter back = load_peft_adapter(dir / "a");
  ASSERT_EQ(back.method_state.size(), 2u);
  for (const auto& [name, t] : a.method_state)
    EXPECT_EQ(test::rel_error(back.method_state.at(name), t), 0.0) << name;

  a.method_state.clear();  // saving a stateless adapter over it must not keep the old state
  save_peft_adapter(dir / "a", a);
  EXPECT_FALSE(fs::exists(dir / "a" / kMethodStateFile));
  EXPECT_TRUE(load_peft_adapter(dir / "a").method_state.empty());
}

TEST(MethodRecord, StateWithoutARecordIsRefused) {
  test::TempDir dir;
  PeftAdapter a = small_lora_adapter();
  a.method.reset();
  save_peft_adapter(dir / "a", a);
  std::mt19937 rng(1);
  write_method_state(dir / "a" / kMethodStateFile,
                     {{"model.layers.0.self_attn.q_proj.rows", test::random_tensor({2}, rng)}});
  try {
    load_peft_adapter(dir / "a");
    ADD_FAILURE() << "state without a record accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), kMethodStateFile)) << e.what();
  }
}

// Writes a good halo adapter, then `edit` on its config; loading must fail naming the file and
// `field` on one line.
void expect_refused(const std::function<void(nlohmann::json&)>& edit, const std::string& field) {
  test::TempDir dir;
  MethodOptions m;
  m.method = "halo";
  m.lora = {4, 8.0f};
  m.targets = {"q_proj", "v_proj"};
  m.get<HaloOptions>() = {1, quant::LowpFormat::INT8};
  save_peft_adapter(dir / "a", small_adapter(m));
  const fs::path cfg = dir / "a" / "adapter_config.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(cfg));
  edit(j);
  std::ofstream(cfg) << j.dump(2);
  try {
    load_peft_adapter(dir / "a");
    ADD_FAILURE() << field << ": accepted " << j["loft"].dump();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(test::contains(msg, cfg.string())) << msg;
    EXPECT_TRUE(test::contains(msg, "field " + field + " ")) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(MethodRecord, BadFieldsAreNamedWithTheFile) {
  using J = nlohmann::json;
  expect_refused([](J& j) { j["loft"] = "halo"; }, "loft");
  expect_refused([](J& j) { j["loft"].erase("format_version"); }, "loft.format_version");
  expect_refused([](J& j) { j["loft"]["format_version"] = 2; }, "loft.format_version");
  expect_refused([](J& j) { j["loft"]["format_version"] = "1"; }, "loft.format_version");
  expect_refused([](J& j) { j["loft"].erase("method"); }, "loft.method");
  expect_refused([](J& j) { j["loft"]["method"] = "dora"; }, "loft.method");
  expect_refused([](J& j) { j["loft"]["rank"] = "4"; }, "loft.rank");
  expect_refused([](J& j) { j["loft"]["rank"] = 4.5; }, "loft.rank");
  expect_refused([](J& j) { j["loft"]["rank"] = 0; }, "loft.rank");
  expect_refused([](J& j) { j["loft"]["alpha"] = nullptr; }, "loft.alpha");
  expect_refused([](J& j) { j["loft"]["targets"] = "q_proj"; }, "loft.targets");
  expect_refused([](J& j) { j["loft"]["targets"] = {"q_proj", "qproj"}; }, "loft.targets");
  expect_refused([](J& j) { j["loft"]["targets"] = J::array(); }, "loft.targets");
  expect_refused([](J& j) { j["loft"].erase("halo"); }, "loft.halo");
  expect_refused([](J& j) { j["loft"]["halo"]["level"] = 1.5; }, "loft.halo.level");
  expect_refused([](J& j) { j["loft"]["halo"]["level"] = 3; }, "loft.halo.level");
  expect_refused([](J& j) { j["loft"]["halo"]["format"] = "fp4"; }, "loft.halo.format");
  expect_refused([](J& j) { j["loft"]["halo"].erase("format"); }, "loft.halo.format");
  // The record restates PEFT's fields; a contradiction would build a model the tensors miss.
  expect_refused([](J& j) { j["loft"]["rank"] = 8; }, "loft.rank");
  expect_refused([](J& j) { j["loft"]["alpha"] = 16; }, "loft.alpha");
  expect_refused([](J& j) { j["loft"]["targets"] = {"q_proj"}; }, "loft.targets");
  expect_refused([](J& j) { j["r"] = "4"; }, "r");
}

TEST(MethodRecord, HaloFormatNamesInvertTheParser) {
  for (const char* name : {"fp8", "int8"})
    EXPECT_EQ(halo_format_name(parse_halo_format(name)), name);
}

}  // namespace
}  // namespace loft
