// train_step (engine/train/train_step.h), the one step finetune and bench both take, on a model
// whose gradients the test chooses: the loss scale over micro-batches, the norm before clipping,
// the clipped AdamW update against the per-tensor ops, grads consumed, after_step once, and the
// errors that stop a step before anything is applied.
#include <cmath>
#include <limits>

#include "engine/ops/adamw_math.h"
#include "engine/ops/ops.h"
#include "engine/train/train_step.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

// Two params; forward_backward adds grad_scale · (the next grads) and reports `losses` in turn.
class FakeModel : public TrainableModel {
 public:
  FakeModel() {
    std::mt19937 rng(5);
    for (const char* name : {"a", "b"}) {
      Param p{name, test::random_tensor({37}, rng), Tensor::zeros({37}, DType::F32)};
      params_.push_back(std::move(p));
    }
  }
  LossSums forward_backward(const ModelBatch& b, float grad_scale) override {
    scales.push_back(grad_scale);
    for (Param& p : params_) {
      std::vector<float> g = p.grad.to_float_vector();
      for (size_t i = 0; i < g.size(); ++i) g[i] += grad_scale * grad_value * float(1 + i % 3);
      p.grad.copy_from(Tensor::from_vector(g, p.grad.shape()));
    }
    const double loss = losses.empty() ? 1.0 : losses[std::min(scales.size(), losses.size()) - 1];
    return {loss * double(b.target_count), b.target_count};
  }
  LossSums evaluate(const ModelBatch&) override { return {}; }
  std::vector<Param*> params() override { return {&params_[0], &params_[1]}; }
  void after_step() override { ++after_steps; }
  void refresh_copies() override {}

  std::vector<Param> params_;
  std::vector<float> scales;
  std::vector<double> losses;
  float grad_value = 1.0f;
  int after_steps = 0;
};

ModelBatch batch_with(int64_t rows, int64_t targets) {
  ModelBatch b;
  b.rows = rows;
  b.seq = 4;
  b.ids = Tensor::zeros({rows * 4}, DType::I32);
  b.target_count = targets;
  return b;
}

TEST(TrainStep, ScalesByAllTargetsClipsAndConsumesGrads) {
  for (double max_norm : {0.0, 0.5, 1e6}) {
    SCOPED_TRACE(cat("max_grad_norm=", max_norm));
    FakeModel model;
    AdamW opt(model.params(), {.weight_decay = 0.01});
    // The reference: the same params through the per-tensor ops.
    std::vector<Tensor> p, m, v;
    for (Param* x : model.params()) {
      p.push_back(x->value.clone());
      m.push_back(Tensor::zeros(x->value.shape(), DType::F32));
      v.push_back(Tensor::zeros(x->value.shape(), DType::F32));
    }
    const std::vector<ModelBatch> micro = {batch_with(2, 5), batch_with(3, 7)};
    for (int64_t step = 1; step <= 3; ++step) {
      model.grad_value = float(step);
      model.scales.clear();
      const StepResult r = train_step(model, opt, micro, max_norm, 1e-2, step);
      ASSERT_EQ(model.scales.size(), 2u);
      EXPECT_EQ(model.scales[0], 1.0f / 12.0f);  // 1 / (5 + 7), not per micro-batch
      EXPECT_EQ(model.scales[1], 1.0f / 12.0f);
      EXPECT_EQ(r.targets, 12);
      EXPECT_EQ(r.tokens, 20);
      EXPECT_DOUBLE_EQ(r.loss_sum, 12.0);

      // Each grad is 2 · (1/12) · step · (1 + i%3) in fp32; the norm is taken before clipping.
      std::vector<Tensor> g;
      double sq = 0;
      for (const Tensor& x : p) {
        std::vector<float> gv(size_t(x.numel()));
        for (size_t i = 0; i < gv.size(); ++i) {
          const float once = (1.0f / 12.0f) * float(step) * float(1 + i % 3);
          gv[i] = 0.0f + once + once;
        }
        g.push_back(Tensor::from_vector(gv, x.shape()));
        sq += ops::cpu::sum_squares(g.back());
      }
      EXPECT_DOUBLE_EQ(r.grad_norm, std::sqrt(sq));
      const float factor = ops::clip_factor(r.grad_norm, max_norm);
      if (max_norm == 0.5) {
        EXPECT_LT(factor, 1.0f) << "the test means to clip";
      }
      for (size_t i = 0; i < p.size(); ++i) {
        if (factor != 1.0f) ops::cpu::scale(g[i], factor);
        ops::cpu::adamw(p[i], g[i], m[i], v[i], {.lr = 1e-2, .weight_decay = 0.01, .step = step});
        EXPECT_EQ(model.params()[i]->value.to_float_vector(), p[i].to_float_vector());
        EXPECT_EQ(model.params()[i]->grad.to_float_vector(), std::vector<float>(37, 0.0f))
            << "the step consumes the grads";
      }
      EXPECT_EQ(model.after_steps, step);
      EXPECT_EQ(opt.steps_taken(), step);
    }
    // The moments are the checkpoint's, under their names.
    const auto state = opt.state();
    ASSERT_EQ(state.size(), 4u);
    EXPECT_EQ(state[0].first, "a.exp_avg");
    EXPECT_EQ(state[3].first, "b.exp_avg_sq");
    EXPECT_EQ(state[0].second.to_float_vector(), m[0].to_float_vector());
    EXPECT_EQ(state[3].second.to_float_vector(), v[1].to_float_vector());
  }
}

TEST(TrainStep, NonFiniteLossStopsBeforeTheUpdate) {
  FakeModel model;
  AdamW opt(model.params(), {});
  const std::vector<float> before = model.params()[0]->value.to_float_vector();
  model.losses = {1.0, std::numeric_limits<double>::quiet_NaN()};
  const std::vector<ModelBatch> micro = {batch_with(1, 3), batch_with(1, 3)};
  try {
    train_step(model, opt, micro, 1.0, 1e-2, 7);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "step 7: loss is nan in micro-batch 2 of 2"));
    EXPECT_TRUE(test::contains(e.what(), "nothing from this step was applied"));
  }
  EXPECT_EQ(model.params()[0]->value.to_float_vector(), before);
  EXPECT_EQ(opt.steps_taken(), 0);
  EXPECT_EQ(model.after_steps, 0);
}

TEST(TrainStep, NonFiniteGradNormStopsBeforeTheUpdate) {
  FakeModel model;
  AdamW opt(model.params(), {});
  const std::vector<float> before = model.params()[1]->value.to_float_vector();
  model.grad_value = std::numeric_limits<float>::infinity();
  try {
    train_step(model, opt, std::vector<ModelBatch>{batch_with(1, 2)}, 1.0, 1e-2, 3);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "step 3: gradient norm is inf"));
  }
  EXPECT_EQ(model.params()[1]->value.to_float_vector(), before);
  EXPECT_EQ(opt.steps_taken(), 0);
  EXPECT_EQ(model.after_steps, 0);
}

}  // namespace
}  // namespace loft
