#include "tests/common/golden.h"

#include <algorithm>
#include <cmath>

#include "engine/io/safetensors_checkpoint.h"
#include "engine/io/safetensors_reader.h"
#include "engine/ops/ops.h"
#include "engine/peft/lora_linear.h"
#include "engine/train/trainer.h"
#include "models/llama/model.h"
#include "models/llama/weights.h"
#include "tests/common/test_util.h"

namespace loft::test {

namespace {

std::string peft_name(const std::string& module, const char* ab) {
  return "base_model.model." + module + ".lora_" + ab + ".default.weight";
}

SafetensorsReader open_golden(const std::string& name) {
  return SafetensorsReader::open(data_path("golden/" + name));
}

std::vector<float> floats(const SafetensorsReader& f, const std::string& name) {
  return f.tensor(name).to_float_vector();
}

void round_to_bf16(Tensor& t) {
  Tensor b = Tensor::empty(t.shape(), DType::BF16, t.device());
  ops::convert(t, b);
  ops::convert(b, t);
}

std::unique_ptr<llama::LlamaModel> build_model(const std::string& model_dir,
                                               const SafetensorsReader& g, Device device,
                                               DType dtype, bool bf16_frozen) {
  const auto dir = data_path("models/" + model_dir);
  const auto cfg = llama::load_llama_config(dir);
  auto w = llama::load_llama_weights(SafetensorsCheckpoint::open(dir), cfg, dtype, device);
  if (bf16_frozen) {
    LOFT_CHECK(dtype == DType::F32, "bf16_frozen_weights needs an f32 run");
    round_to_bf16(w.embed);
    round_to_bf16(w.final_norm);
    if (w.lm_head.defined()) round_to_bf16(w.lm_head);
    for (auto& L : w.layers) {
      for (Tensor* t : {&L.attn_norm, &L.ffn_norm, &L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down,
                        &L.q_norm, &L.k_norm})
        if (t->defined()) round_to_bf16(*t);
      for (Tensor& b : L.bias)
        if (b.defined()) round_to_bf16(b);
    }
  }
  std::mt19937_64 rng(0);
  return std::make_unique<llama::LlamaModel>(
      cfg, std::move(w),
      [&](const std::string& name, const std::string&, Tensor wt) -> std::unique_ptr<AdaptedLinear> {
        auto lin = std::make_unique<LoraLinear>(name, std::move(wt), LoraOptions{8, 16.0f}, rng);
        lin->set_adapter(g.tensor("init/" + peft_name(name, "A")),
                         g.tensor("init/" + peft_name(name, "B")));
        return lin;
      });
}

// Module name + ".A"/".B" -> the Param's value or grad (F32, CPU).
std::map<std::string, Tensor> lora_tensors(llama::LlamaModel& model, bool grads) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, lin] : model.linears()) {
    auto* lora = dynamic_cast<LoraLinear*>(lin);
    LOFT_CHECK(lora, name, " is not a LoRA projection");
    for (auto [p, ab] : {std::pair{&lora->lora_a(), ".A"}, std::pair{&lora->lora_b(), ".B"}})
      out[name + ab] = (grads ? p->grad : p->value).to(Device::cpu());
  }
  return out;
}

class FixedBatch : public BatchSource {
 public:
  explicit FixedBatch(ModelBatch b) : b_(std::move(b)) {}
  std::optional<ModelBatch> next() override { return b_; }
  nlohmann::json state() const override { return nlohmann::json::object(); }
  void restore(const nlohmann::json&) override {}

 private:
  ModelBatch b_;
};

ModelBatch golden_batch(const SafetensorsReader& g, Device device) {
  const Tensor ids = g.tensor("input_ids");
  std::vector<int32_t> id32, labels;
  for (int64_t v : ids.to_int_vector()) id32.push_back(int32_t(v));
  for (int64_t v : g.tensor("labels").to_int_vector()) labels.push_back(int32_t(v));
  return make_batch(id32, labels, {}, ids.size(0), ids.size(1), device);
}

}  // namespace

GoldenRun golden_from_file(const std::string& golden) {
  const SafetensorsReader g = open_golden(golden);
  GoldenRun r;
  r.logits = g.tensor("logits");
  r.loss = floats(g, "loss")[0];
  for (const std::string& name : g.names()) {
    for (auto [prefix, dst] : {std::pair{"grad/", &r.grad}, std::pair{"step1/", &r.step1},
                               std::pair{"step3/", &r.step3}}) {
      const std::string head = std::string(prefix) + "base_model.model.";
      if (name.rfind(head, 0) != 0) continue;
      // "...q_proj.lora_A.default.weight" -> "...q_proj.A"
      const std::string rest = name.substr(head.size());
      const size_t at = rest.find(".lora_");
      (*dst)[rest.substr(0, at) + "." + rest.substr(at + 6, 1)] = g.tensor(name);
    }
  }
  r.losses = floats(g, "losses");
  r.norms = floats(g, "grad_norms_before_clip");
  return r;
}

GoldenRun golden_from_loft(const std::string& model_dir, const std::string& golden, Device device,
                           DType dtype, bool bf16_frozen) {
  const SafetensorsReader g = open_golden(golden);
  const ModelBatch batch = golden_batch(g, device);
  GoldenRun r;
  auto model = build_model(model_dir, g, device, dtype, bf16_frozen);
  r.logits = model->logits(batch);
  const LossSums s = model->forward_backward(batch, 1.0f / float(batch.target_count));
  r.loss = s.loss_sum / double(s.tokens);
  r.grad = lora_tensors(*model, true);

  auto fresh = build_model(model_dir, g, device, dtype, bf16_frozen);
  FixedBatch data(batch);
  TrainerConfig cfg;
  cfg.steps = 3;
  cfg.schedule = {ScheduleKind::Constant, 1e-3, 0, 3};
  cfg.max_grad_norm = 1.0;
  cfg.quiet = true;
  Trainer trainer(*fresh, data, cfg);
  trainer.run([&](const StepMetrics& m) {
    r.losses.push_back(float(m.loss));
    r.norms.push_back(float(m.grad_norm));
    if (m.step == 1) r.step1 = lora_tensors(*fresh, false);
  });
  r.step3 = lora_tensors(*fresh, false);
  return r;
}

double worst_grad_error(const GoldenRun& got, const GoldenRun& want) {
  double worst = 0;
  for (const auto& [k, v] : want.grad) worst = std::max(worst, rel_error(got.grad.at(k), v));
  return worst;
}

void expect_golden_match(const GoldenRun& got, const GoldenRun& want, const GoldenTolerance& tol,
                         const std::string& what) {
  EXPECT_LT(rel_error(got.logits, want.logits), tol.logits) << what << " logits";
  EXPECT_NEAR(got.loss, want.loss, tol.loss * std::abs(want.loss)) << what << " loss";
  for (auto [name, g, w, t] :
       {std::tuple{"grad", &got.grad, &want.grad, tol.grads},
        std::tuple{"step1", &got.step1, &want.step1, tol.params},
        std::tuple{"step3", &got.step3, &want.step3, tol.params}}) {
    ASSERT_EQ(g->size(), w->size()) << what << " " << name;
    for (const auto& [k, v] : *w) {
      ASSERT_TRUE(g->count(k)) << what << " " << name << " lacks " << k;
      EXPECT_LT(rel_error(g->at(k), v), t) << what << " " << name << " " << k;
    }
  }
  ASSERT_EQ(got.losses.size(), want.losses.size()) << what;
  for (size_t i = 0; i < want.losses.size(); ++i) {
    EXPECT_NEAR(got.losses[i], want.losses[i], tol.losses * std::abs(want.losses[i]))
        << what << " loss of step " << i + 1;
    EXPECT_NEAR(got.norms[i], want.norms[i], tol.grads * std::abs(want.norms[i]))
        << what << " grad norm of step " << i + 1;
  }
}

void check_golden_lora(const std::string& model, const std::string& golden, Device device,
                       DType dtype, const GoldenTolerance& tol) {
  expect_golden_match(golden_from_loft(model, golden, device, dtype), golden_from_file(golden), tol,
                      model + " on " + device.str());
}

}  // namespace loft::test
