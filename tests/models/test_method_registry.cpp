// The method registry (engine/peft/method_spec.h): every registered spec is complete and
// consistent; records as loft wrote them before the registry read back to the same options and are
// written again byte for byte; another method's option is refused where it would be ignored; a
// PEFT pair is imported through AdaptedLinear's hook; resume refreshes copies without applying an
// update (FALQON's row merge).
#include "engine/methods/falqon/falqon_linear.h"
#include "engine/peft/frozen_linear.h"
#include "engine/peft/halo_weight.h"
#include "engine/peft/method_record.h"
#include "engine/peft/method_spec.h"
#include "engine/train/trainer.h"
#include "models/llama/loading.h"
#include "models/llama/memory_estimate.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

TEST(MethodRegistry, EverySpecIsComplete) {
  std::set<std::string> names;
  ASSERT_EQ(method_names().size(), method_specs().size());
  EXPECT_EQ(MethodOptions().method, method_names().front());
  llama::LlamaConfig cfg = llama::load_llama_config(test::data_path("models/stories260K-hf"));
  std::map<std::string, int64_t> rows;  // every form's name and total
  for (const llama::MethodMemory& m : llama::estimate_training_memory(cfg, {}))
    EXPECT_TRUE(rows.emplace(m.method, m.total()).second) << m.method;
  for (size_t i = 0; i < method_specs().size(); ++i) {
    const MethodSpec& s = *method_specs()[i];
    EXPECT_EQ(s.name(), method_names()[i]);
    EXPECT_TRUE(names.insert(s.name()).second) << s.name();
    EXPECT_EQ(&method_spec(s.name()), &s);
    std::set<std::string> flags;
    MethodOptions m;
    m.method = s.name();
    m.targets = parse_lora_targets("all");
    for (const MethodFlag& f : s.flags()) {
      EXPECT_TRUE(f.name.rfind("--", 0) == 0 && flags.insert(f.name).second) << f.name;
      EXPECT_FALSE(f.help.empty()) << f.name;
      ASSERT_TRUE(f.set && f.get) << f.name;
      f.set(m, f.get(m));  // what get prints, set reads
    }
    apply_method_invariants(m);
    EXPECT_NO_THROW(validate_method_options(m)) << s.name();
    // The row the options train with is one of the forms listed, with the same bytes.
    const llama::MethodMemory chosen = llama::estimate_method_memory(cfg, {}, m);
    ASSERT_TRUE(rows.count(chosen.method)) << s.name() << " " << chosen.method;
    EXPECT_EQ(rows[chosen.method], chosen.total()) << chosen.method;
    const nlohmann::json j = method_options_to_json(m);
    EXPECT_EQ(method_options_to_json(method_options_from_json(j, "cfg.json")), j) << j.dump();
  }
}

TEST(MethodRegistry, UnknownMethodsAreUsageErrors) {
  EXPECT_EQ(find_method_spec("dora"), nullptr);
  try {
    method_spec("dora");
    ADD_FAILURE() << "dora accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--method: 'dora' is not one of " + method_name_list());
  }
}

// Records as loft wrote them before the registry (format 1): they read, and write back unchanged.
TEST(MethodRegistry, RecordsWrittenBeforeReadAndWriteTheSame) {
  const std::string targets = R"("targets":["down_proj","gate_proj","k_proj","o_proj","q_proj","up_proj","v_proj"])";
  for (const std::string& text :
       {R"({"alpha":16.0,"format_version":1,"method":"lora","rank":8,)" + targets + "}",
        R"({"alpha":16.0,"format_version":1,"method":"qlora","rank":8,)" + targets + "}",
        R"({"alpha":8.0,"falqon":{"buffer":"reset","topk":3},"format_version":1,"method":"falqon","rank":8,)" + targets + "}",
        R"({"alpha":8.0,"format_version":1,"halo":{"backbone":"nf4","format":"int8","level":1},"method":"halo","rank":16,)" + targets + "}"}) {
    const nlohmann::json j = nlohmann::json::parse(text);
    EXPECT_EQ(method_options_to_json(method_options_from_json(j, "cfg.json")).dump(), j.dump());
  }
  // Before the NF4 backbone, HALO records had no "backbone": dense.
  const MethodOptions old = method_options_from_json(
      nlohmann::json::parse(R"({"alpha":8.0,"format_version":1,"halo":{"format":"fp8","level":2},"method":"halo","rank":16,)" + targets + "}"),
      "cfg.json");
  EXPECT_EQ(old.get<HaloOptions>().backbone, HaloBackbone::Dense);
  EXPECT_EQ(old.get<HaloOptions>().level, 2);
  const MethodOptions f = method_options_from_json(
      nlohmann::json::parse(R"({"alpha":8.0,"falqon":{"buffer":"reset","topk":3},"format_version":1,"method":"falqon","rank":8,)" + targets + "}"),
      "cfg.json");
  EXPECT_EQ(f.get<FalqonOptions>().topk, 3);
  EXPECT_EQ(f.get<FalqonOptions>().buffer, FalqonOptions::Buffer::reset);
}

TEST(MethodRegistry, AnotherMethodsOptionIsRefusedWhereItWouldBeIgnored) {
  MethodOptions m{"qlora", {8, 16.0f}, parse_lora_targets("all")};
  m.get<HaloOptions>().backbone = HaloBackbone::Nf4;
  try {
    validate_method_options(m);
    ADD_FAILURE() << "qlora took --backbone nf4";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--backbone nf4 applies to --method halo, hot only (got --method qlora; qlora already "
              "stores its backbone NF4)");
  }
  m.get<HaloOptions>() = {1, quant::LowpFormat::INT8};  // ignored under qlora, as before
  EXPECT_NO_THROW(validate_method_options(m));
}

TEST(MethodRegistry, PeftPairsAreImportedThroughTheHook) {
  std::mt19937 g(1);
  std::mt19937_64 rng(2);
  const Tensor w = test::random_tensor({6, 5}, g);
  LoraLinear lora("l", w.clone(), {2, 4.0f}, rng);
  FrozenLinear frozen(w.clone());
  FalqonLinear falqon("l", WeightSource(w.clone()), 2, {});
  EXPECT_TRUE(lora.imports_peft_pair());
  EXPECT_FALSE(frozen.imports_peft_pair());
  EXPECT_FALSE(falqon.imports_peft_pair());
  const Tensor a = test::random_tensor({2, 5}, g), b = test::random_tensor({6, 2}, g);
  AdaptedLinear& any = lora;
  any.import_peft_pair(a, b);
  EXPECT_EQ(test::rel_error(lora.lora_a().value, a), 0.0);
  EXPECT_EQ(test::rel_error(lora.lora_b().value, b), 0.0);
  EXPECT_THROW(any.import_peft_pair(b, a), Error);
  EXPECT_THROW(static_cast<AdaptedLinear&>(frozen).import_peft_pair(a, b), Error);
}

// Counts each hook; after_step still does what LoRA's does.
class CountingLora : public LoraLinear {
 public:
  using LoraLinear::LoraLinear;
  void after_step() override {
    ++after_steps;
    LoraLinear::after_step();
  }
  void refresh_copies() override {
    ++refreshes;
    LoraLinear::refresh_copies();
  }
  int after_steps = 0, refreshes = 0;
};

// One batch of fixed tokens, every step.
class SameBatch : public BatchSource {
 public:
  std::optional<ModelBatch> next() override {
    std::vector<int32_t> ids(64);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i * 37 % 512);
    return make_batch(ids, ids, {}, 2, 32, Device::cpu());
  }
  nlohmann::json state() const override { return nullptr; }
  void restore(const nlohmann::json&) override {}
};

std::unique_ptr<llama::LlamaModel> counting_model(std::vector<CountingLora*>& out) {
  static std::mt19937_64 rng(3);
  return llama::load_model(test::data_path("models/stories260K-hf"), Device::cpu(),
                           [&out](const std::string& name, const std::string& target,
                                  WeightSource w) -> std::unique_ptr<AdaptedLinear> {
                             if (target != "q_proj") return std::make_unique<FrozenLinear>(w.dense());
                             auto l = std::make_unique<CountingLora>(name, w.dense(), LoraOptions{2, 4.0f}, rng);
                             out.push_back(l.get());
                             return l;
                           });
}

TEST(MethodRegistry, ResumeRefreshesCopiesWithoutAnUpdate) {
  test::TempDir dir;
  TrainerConfig c;
  c.steps = 3;
  c.schedule = {ScheduleKind::Constant, 1e-2, 0, 3};
  c.save_every = 2;
  c.run_dir = dir / "run";
  c.quiet = true;
  std::vector<CountingLora*> first;
  auto model = counting_model(first);
  SameBatch data;
  Trainer(*model, data, c).run();
  ASSERT_FALSE(first.empty());
  for (const CountingLora* l : first) EXPECT_EQ(l->after_steps, 3);

  std::vector<CountingLora*> again;
  auto resumed = counting_model(again);
  for (CountingLora* l : again) l->refreshes = 0;
  SameBatch data2;
  c.run_dir = dir / "run2";
  Trainer t(*resumed, data2, c);
  ASSERT_EQ(t.resume(dir / "run" / "checkpoints" / "step-2"), 2);
  for (const CountingLora* l : again) {
    EXPECT_EQ(l->after_steps, 0) << "resume applied an update";
    EXPECT_GE(l->refreshes, 1) << "resume left the compute copies stale";
  }
}

}  // namespace
}  // namespace loft
