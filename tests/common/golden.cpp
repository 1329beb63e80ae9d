#include "tests/common/golden.h"

#include <cmath>

#include "engine/io/safetensors_checkpoint.h"
#include "engine/io/safetensors_reader.h"
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

struct Golden {
  SafetensorsReader file;
  std::vector<int32_t> ids, labels;
  int64_t rows, seq;
};

Golden read_golden(const std::string& name) {
  Golden g{SafetensorsReader::open(data_dir() / "golden" / name), {}, {}, 0, 0};
  const Tensor ids = g.file.tensor("input_ids");
  g.rows = ids.size(0);
  g.seq = ids.size(1);
  for (int64_t v : ids.to_int_vector()) g.ids.push_back(int32_t(v));
  for (int64_t v : g.file.tensor("labels").to_int_vector()) g.labels.push_back(int32_t(v));
  return g;
}

std::unique_ptr<llama::LlamaModel> build_model(const std::string& model_dir, const Golden& g,
                                               Device device, DType dtype) {
  const auto dir = data_dir() / "models" / model_dir;
  const auto cfg = llama::load_llama_config(dir);
  auto weights = llama::load_llama_weights(SafetensorsCheckpoint::open(dir), cfg, dtype, device);
  std::mt19937_64 rng(0);
  auto model = std::make_unique<llama::LlamaModel>(
      cfg, std::move(weights),
      [&](const std::string& name, const std::string&, Tensor w) -> std::unique_ptr<AdaptedLinear> {
        auto lin = std::make_unique<LoraLinear>(name, std::move(w), LoraOptions{8, 16.0f}, rng);
        lin->set_adapter(g.file.tensor("init/" + peft_name(name, "A")),
                         g.file.tensor("init/" + peft_name(name, "B")));
        return lin;
      });
  return model;
}

// Compares every LoRA tensor of the model (values or grads) with golden "<prefix>/<peft name>".
void expect_params(llama::LlamaModel& model, const Golden& g, const std::string& prefix,
                   bool grads, double tol) {
  for (const auto& [name, lin] : model.linears()) {
    auto* lora = dynamic_cast<LoraLinear*>(lin);
    ASSERT_NE(lora, nullptr);
    for (auto [p, ab] : {std::pair{&lora->lora_a(), "A"}, std::pair{&lora->lora_b(), "B"}}) {
      const Tensor want = g.file.tensor(prefix + "/" + peft_name(name, ab));
      const Tensor& got = grads ? p->grad : p->value;
      EXPECT_LT(rel_error(got, want), tol) << prefix << " " << p->name;
    }
  }
}

class FixedBatch : public BatchSource {
 public:
  explicit FixedBatch(Batch b) : b_(std::move(b)) {}
  std::optional<Batch> next() override { return b_; }
  nlohmann::json state() const override { return nlohmann::json::object(); }
  void restore(const nlohmann::json&) override {}

 private:
  Batch b_;
};

}  // namespace

void check_golden_lora(const std::string& model_dir, const std::string& golden, Device device,
                       DType dtype, const GoldenTolerance& tol) {
  const Golden g = read_golden(golden);
  const Batch batch = make_batch(g.ids, g.labels, {}, g.rows, g.seq, device);

  // Forward: logits and loss; backward: every LoRA gradient.
  auto model = build_model(model_dir, g, device, dtype);
  EXPECT_LT(rel_error(model->logits(batch), g.file.tensor("logits")), tol.logits);
  const LossSums s = model->forward_backward(batch, 1.0f / float(batch.target_count));
  const double loss = s.loss_sum / double(s.tokens);
  const double want_loss = g.file.tensor("loss").to_float_vector()[0];
  EXPECT_NEAR(loss, want_loss, tol.loss * std::abs(want_loss));
  expect_params(*model, g, "grad", /*grads=*/true, tol.grads);

  // Three AdamW steps (lr 1e-3, clip 1.0) through the trainer, on a fresh model.
  auto fresh = build_model(model_dir, g, device, dtype);
  FixedBatch data(batch);
  TrainerConfig cfg;
  cfg.steps = 3;
  cfg.schedule = {ScheduleKind::Constant, 1e-3, 0, 3};
  cfg.max_grad_norm = 1.0;
  cfg.quiet = true;
  Trainer trainer(*fresh, data, cfg);
  std::vector<float> losses, norms;
  trainer.run([&](const StepMetrics& m) {
    losses.push_back(float(m.loss));
    norms.push_back(float(m.grad_norm));
    if (m.step == 1) expect_params(*fresh, g, "step1", false, tol.params);
  });
  expect_params(*fresh, g, "step3", false, tol.params);
  const auto want_losses = g.file.tensor("losses").to_float_vector();
  const auto want_norms = g.file.tensor("grad_norms_before_clip").to_float_vector();
  ASSERT_EQ(losses.size(), want_losses.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    EXPECT_NEAR(losses[i], want_losses[i], tol.losses * std::abs(want_losses[i])) << "loss " << i;
    EXPECT_NEAR(norms[i], want_norms[i], tol.grads * std::abs(want_norms[i])) << "norm " << i;
  }
}

}  // namespace loft::test
