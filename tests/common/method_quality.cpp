#include "tests/common/method_quality.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "engine/optim/adamw.h"
#include "models/llama/loading.h"
#include "tests/common/test_util.h"

namespace loft::test {

namespace {
MethodOptions with_rank8(std::string method) {
  MethodOptions m;
  m.method = std::move(method);
  m.lora = {8, 16.0f};
  m.targets = parse_lora_targets("all");
  return m;
}

QualityMethod halo(int level, quant::LowpFormat format) {
  QualityMethod q{cat("halo-", quant::format_name(format), "-l", level), with_rank8("halo"),
                  /*held_to_bound=*/level > 0};
  q.options.halo.level = level;
  q.options.halo.format = format;
  return q;
}
}  // namespace

QualityMethod lora_reference() { return {"lora", with_rank8("lora")}; }

std::vector<QualityMethod> low_precision_methods() {
  std::vector<QualityMethod> out{{"qlora", with_rank8("qlora")}};
  for (int level : {0, 1})
    for (auto f : {quant::LowpFormat::E4M3, quant::LowpFormat::INT8}) out.push_back(halo(level, f));
  return out;
}

ValLoss trained_val_loss(const std::string& model_name, const MethodOptions& m, int steps,
                         Device device) {
  const auto dir = data_dir() / "models" / model_name;
  std::mt19937_64 rng(21);
  auto model = llama::load_model(dir, device, make_linear_factory(m, rng));
  const int64_t vocab = model->config().vocab_size;
  auto batch = [&](int gram_seed, int noise_seed) {
    std::mt19937 g{uint32_t(gram_seed)}, noise{uint32_t(noise_seed + 100)};
    std::vector<int32_t> gram(8), ids(2 * 64);
    for (auto& t : gram) t = int32_t(g() % uint32_t(vocab));
    for (size_t i = 0; i < ids.size(); ++i)
      ids[i] = (i % 11 == 0) ? int32_t(noise() % uint32_t(vocab)) : gram[i % 8];
    return make_batch(ids, ids, {}, 2, 64, device);
  };
  const Batch val = batch(0, 1000);
  const LossSums v0 = model->evaluate(val);
  AdamW opt(model->params(), {});
  for (int s = 0; s < steps; ++s) {
    const Batch b = batch(s % 4, s);
    model->forward_backward(b, 1.0f / float(b.target_count));
    clip_grad_norm(model->params(), 1.0);
    opt.step(3e-3);
    opt.zero_grad();
    model->after_step();
  }
  const LossSums v = model->evaluate(val);
  return {v0.loss_sum / double(v0.tokens), v.loss_sum / double(v.tokens)};
}

void expect_methods_near_lora(const std::string& model, Device device, int steps,
                              double tolerance) {
  const ValLoss ref = trained_val_loss(model, lora_reference().options, steps, device);
  std::printf("%s on %s, %d steps: lora val loss %.4f -> %.4f\n", model.c_str(),
              device.str().c_str(), steps, ref.before, ref.after);
  ASSERT_LT(ref.after, 0.5 * ref.before) << "LoRA did not learn the data: the comparison means nothing";
  for (const QualityMethod& q : low_precision_methods()) {
    const ValLoss got = trained_val_loss(model, q.options, steps, device);
    const double rel = (got.after - ref.after) / ref.after;
    std::printf("| %s | %s | %s | %.4f | %+.2f%% |%s\n", model.c_str(), device.str().c_str(),
                q.name.c_str(), got.after, 100.0 * rel, q.held_to_bound ? "" : " (reported only)");
    ::testing::Test::RecordProperty(model + "/" + q.name, std::to_string(got.after));
    EXPECT_LT(got.after, got.before) << q.name << " did not learn";
    if (q.held_to_bound)
      EXPECT_LT(std::abs(rel), tolerance) << q.name << ": " << got.after << " vs lora " << ref.after;
  }
}

}  // namespace loft::test
