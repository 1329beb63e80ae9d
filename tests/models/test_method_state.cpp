// Method state (AdaptedLinear::method_state) on a LoRA subclass that keeps a running sum, as
// FALQON keeps its applied updates: it round-trips through an adapter folder
// (loft_state.safetensors) and through a checkpoint resume, which then continues exactly as the
// uninterrupted run; missing, extra and mis-shaped state is refused naming the file and module.
#include "engine/ops/ops.h"
#include "engine/peft/frozen_linear.h"
#include "engine/peft/method_state.h"
#include "engine/train/trainer.h"
#include "models/llama/loading.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

// LoRA plus "acc" [out]: after every step, acc += the row sums of B (a stand-in for FALQON's
// ΣΔB_applied). acc is not a Param, so only method_state can carry it.
class AccumulatingLora : public LoraLinear {
 public:
  using LoraLinear::LoraLinear;
  void after_step() override {
    LoraLinear::after_step();
    if (!acc_.defined()) acc_ = Tensor::zeros({out_features()}, DType::F32);
    const Tensor b = lora_b().value.to(Device::cpu());
    for (int64_t o = 0; o < out_features(); ++o)
      for (int64_t k = 0; k < options().rank; ++k)
        acc_.ptr<float>()[o] += b.ptr<float>()[o * options().rank + k];
  }
  std::map<std::string, Tensor> method_state() const override {
    return {{"acc", acc_.defined() ? acc_.clone() : Tensor::zeros({out_features()}, DType::F32)}};
  }
  void load_method_state(const std::map<std::string, Tensor>& state) override {
    auto it = state.find("acc");
    if (it == state.end()) throw Error("method state key 'acc' is missing");
    if (it->second.shape() != Shape{out_features()} || it->second.dtype() != DType::F32)
      throw Error(
          cat("method state 'acc' is ", it->second.str(), ", expected [", out_features(), "]"));
    acc_ = it->second.clone();
  }

 private:
  Tensor acc_;
};

fs::path model_dir() { return test::data_path("models/stories260K-hf"); }

MethodOptions options() {
  MethodOptions m;
  m.lora = {4, 8.0f};
  m.targets = {"q_proj", "down_proj"};
  return m;
}

std::unique_ptr<llama::LlamaModel> accumulating_model(std::mt19937_64& rng) {
  const MethodOptions m = options();
  return llama::load_model(model_dir(), Device::cpu(),
                           [&](const std::string& name, const std::string& target,
                               Tensor w) -> std::unique_ptr<AdaptedLinear> {
                             if (!m.targets.count(target))
                               return std::make_unique<FrozenLinear>(std::move(w));
                             return std::make_unique<AccumulatingLora>(name, std::move(w), m.lora,
                                                                       rng);
                           });
}

void expect_equal_state(const std::map<std::string, Tensor>& a,
                        const std::map<std::string, Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_EQ(test::rel_error(b.at(name), t), 0.0) << name;
  }
}

// The model with random B and random acc.
void randomize(llama::LlamaModel& model, uint32_t seed) {
  std::mt19937 rng(seed);
  for (const auto& [name, lin] : model.linears())
    if (auto* l = dynamic_cast<AccumulatingLora*>(lin)) {
      l->set_adapter(l->lora_a().value,
                     test::random_tensor(l->lora_b().value.shape(), rng, -0.1f, 0.1f));
      l->load_method_state({{"acc", test::random_tensor({l->out_features()}, rng)}});
    }
}

TEST(MethodState, RoundTripsThroughAnAdapterFolder) {
  test::TempDir dir;
  std::mt19937_64 rng(1);
  auto model = accumulating_model(rng);
  randomize(*model, 2);
  const auto state = model->method_state();
  ASSERT_EQ(state.size(), 5u * 2u);
  ASSERT_TRUE(state.count("model.layers.3.mlp.down_proj.acc"));
  save_peft_adapter(dir / "a", llama::extract_adapter(*model, options(), model_dir().string()));
  ASSERT_TRUE(fs::exists(dir / "a" / kMethodStateFile));

  const PeftAdapter a = load_peft_adapter(dir / "a");
  std::mt19937_64 rng2(9);
  auto fresh = accumulating_model(rng2);
  llama::apply_adapter(*fresh, a, dir / "a");
  expect_equal_state(fresh->method_state(), state);
  for (size_t i = 0; i < model->linears().size(); ++i)
    if (auto pair = model->linears()[i].second->peft_pair()) {
      const auto back = fresh->linears()[i].second->peft_pair();
      ASSERT_TRUE(back.has_value());
      EXPECT_EQ(test::rel_error(back->first, pair->first), 0.0) << model->linears()[i].first;
      EXPECT_EQ(test::rel_error(back->second, pair->second), 0.0) << model->linears()[i].first;
    }
}

std::string apply_error(const PeftAdapter& a, const fs::path& from, bool accumulating) {
  std::mt19937_64 rng(4);
  auto model = accumulating ? accumulating_model(rng)
                            : llama::load_model(model_dir(), Device::cpu(),
                                                make_linear_factory(options(), rng));
  try {
    llama::apply_adapter(*model, a, from);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MethodState, MissingExtraAndMisshapedStateIsNamed) {
  test::TempDir dir;
  std::mt19937_64 rng(1);
  auto model = accumulating_model(rng);
  randomize(*model, 2);
  const PeftAdapter good = llama::extract_adapter(*model, options(), "");
  const std::string q0 = "model.layers.0.self_attn.q_proj";

  PeftAdapter missing = good;
  missing.method_state.erase(q0 + ".acc");
  std::string e = apply_error(missing, dir / "a", true);
  EXPECT_TRUE(test::contains(e, "no method state for " + q0)) << e;
  EXPECT_TRUE(test::contains(e, kMethodStateFile)) << e;

  PeftAdapter misshaped = good;
  misshaped.method_state[q0 + ".acc"] = Tensor::zeros({3}, DType::F32);
  e = apply_error(misshaped, dir / "a", true);
  EXPECT_TRUE(test::contains(e, q0)) << e;
  EXPECT_TRUE(test::contains(e, "'acc'")) << e;

  PeftAdapter extra_key = good;
  extra_key.method_state[q0 + ".other"] = Tensor::zeros({3}, DType::F32);
  e = apply_error(extra_key, dir / "a", true);
  EXPECT_TRUE(test::contains(e, "other")) << e;

  PeftAdapter unknown_module = good;
  unknown_module.method_state["model.layers.9.self_attn.q_proj.acc"] =
      Tensor::zeros({3}, DType::F32);
  e = apply_error(unknown_module, dir / "a", true);
  EXPECT_TRUE(test::contains(e, "model.layers.9.self_attn.q_proj")) << e;

  // Plain LoRA keeps no state: handing it some is an error, not silently dropped.
  e = apply_error(good, dir / "a", false);
  EXPECT_TRUE(test::contains(e, "keeps none")) << e;
  // State for a projection the run does not adapt.
  PeftAdapter frozen = good;
  frozen.method_state["model.layers.0.self_attn.k_proj.acc"] = Tensor::zeros({3}, DType::F32);
  e = apply_error(frozen, dir / "a", true);
  EXPECT_TRUE(test::contains(e, "k_proj, which this run does not adapt")) << e;
}

class FixedSource : public BatchSource {
 public:
  std::optional<ModelBatch> next() override {
    std::mt19937 rng(
        uint32_t(100 + n_++));  // a different batch each step, reproducible by position
    const Tensor ids = test::random_ids({64}, 512, rng);
    std::vector<int32_t> v(ids.ptr<int32_t>(), ids.ptr<int32_t>() + 64);
    return make_batch(v, v, {}, 2, 32, Device::cpu());
  }
  nlohmann::json state() const override { return n_; }
  void restore(const nlohmann::json& s) override { n_ = s.get<int>(); }

 private:
  int n_ = 0;
};

TrainerConfig trainer_config(const fs::path& run) {
  TrainerConfig c;
  c.steps = 6;
  c.schedule = {ScheduleKind::Constant, 1e-2, 0, 6};
  c.save_every = 3;
  c.run_dir = run;
  c.quiet = true;
  return c;
}

TEST(MethodState, CheckpointResumeRestoresItExactly) {
  test::TempDir dir;
  std::mt19937_64 rng(5);
  auto model = accumulating_model(rng);
  FixedSource data;
  Trainer full(*model, data, trainer_config(dir / "run"));
  std::map<std::string, Tensor> at3;
  full.run([&](const StepMetrics& m) {
    if (m.step == 3) at3 = model->method_state();
  });
  const fs::path ckpt = dir / "run" / "checkpoints" / "step-3";
  ASSERT_TRUE(fs::exists(ckpt / kMethodStateFile));
  expect_equal_state(read_method_state(ckpt / kMethodStateFile), at3);

  std::mt19937_64 rng2(77);  // other initial values: resume must overwrite them all
  auto resumed = accumulating_model(rng2);
  FixedSource data2;
  Trainer again(*resumed, data2, trainer_config(dir / "run2"));
  ASSERT_EQ(again.resume(ckpt), 3);
  expect_equal_state(resumed->method_state(), at3);
  again.run();
  expect_equal_state(resumed->method_state(), model->method_state());

  // A checkpoint without the state file cannot resume a method that keeps state.
  fs::remove(ckpt / kMethodStateFile);
  std::mt19937_64 rng3(5);
  auto third = accumulating_model(rng3);
  FixedSource data3;
  Trainer t3(*third, data3, trainer_config(dir / "run3"));
  try {
    t3.resume(ckpt);
    ADD_FAILURE() << "resumed without method state";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), (ckpt / kMethodStateFile).string())) << e.what();
    EXPECT_TRUE(test::contains(e.what(), "no method state for model.layers.0")) << e.what();
  }
}

TEST(MethodState, LoraCheckpointsHaveNoStateFile) {
  test::TempDir dir;
  std::mt19937_64 rng(5);
  auto model = llama::load_model(model_dir(), Device::cpu(), make_linear_factory(options(), rng));
  FixedSource data;
  TrainerConfig c = trainer_config(dir / "run");
  c.steps = 4;
  Trainer t(*model, data, c);
  t.run();
  EXPECT_TRUE(fs::exists(dir / "run" / "checkpoints" / "step-3" / "adapter.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "run" / "checkpoints" / "step-3" / kMethodStateFile));
}

}  // namespace
}  // namespace loft
