#include "tests/common/method_quality.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "datasets/data_loader.h"
#include "engine/methods/falqon/falqon_linear.h"
#include "engine/methods/hot/hot_weight.h"
#include "engine/optim/adamw.h"
#include "engine/peft/halo_weight.h"
#include "engine/train/trainer.h"
#include "models/llama/loading.h"
#include "tests/common/test_util.h"
#include "tokenizer/tokenizer.h"

namespace loft::test {

namespace {
MethodOptions with_rank8(std::string method) {
  MethodOptions m;
  m.method = std::move(method);
  m.lora = {8, 16.0f};
  m.targets = parse_lora_targets("all");
  return m;
}

QualityMethod halo(int level, quant::LowpFormat format, HaloBackbone backbone = HaloBackbone::Dense) {
  QualityMethod q{cat("halo-", quant::format_name(format), "-l", level,
                      backbone == HaloBackbone::Nf4 ? "-nf4" : ""),
                  with_rank8("halo"), /*held_to_bound=*/level > 0};
  q.options.get<HaloOptions>().level = level;
  q.options.get<HaloOptions>().format = format;
  q.options.get<HaloOptions>().backbone = backbone;
  return q;
}

QualityMethod falqon(FalqonOptions::Buffer buffer) {
  QualityMethod q{cat("falqon-", falqon_buffer_name(buffer)), with_rank8("falqon")};
  q.options.get<FalqonOptions>().buffer = buffer;
  apply_method_invariants(q.options);
  q.lr_scale = 10.0;
  // Reset (the reference code's behaviour, our default) drops every unapplied row of ΔB after each
  // step; at k = r = 8 rows per step on these small models it lands 12-25% above LoRA (H200 and
  // CPU, 2026-11-21). Reported, not held to the bound; accumulate is.
  q.held_to_bound = buffer == FalqonOptions::Buffer::accumulate;
  return q;
}
QualityMethod hot(bool lqs) {
  QualityMethod q{lqs ? "hot-int4-lqs" : "hot-int4", with_rank8("hot")};
  q.options.get<HotOptions>().lqs = lqs;
  q.bound = 0.03;
  return q;
}
}  // namespace

QualityMethod lora_reference() { return {"lora", with_rank8("lora")}; }

std::vector<QualityMethod> low_precision_methods() {
  std::vector<QualityMethod> out{{"qlora", with_rank8("qlora")}};
  for (int level : {0, 1, 2})
    for (auto f : {quant::LowpFormat::E4M3, quant::LowpFormat::INT8}) out.push_back(halo(level, f));
  for (auto f : {quant::LowpFormat::E4M3, quant::LowpFormat::INT8})
    out.push_back(halo(2, f, HaloBackbone::Nf4));
  out.push_back(falqon(FalqonOptions::Buffer::reset));
  out.push_back(falqon(FalqonOptions::Buffer::accumulate));
  out.push_back(hot(false));
  out.push_back(hot(true));
  return out;
}

ValLoss trained_val_loss(const std::string& model_name, const MethodOptions& m, int steps,
                         Device device, double lr) {
  const auto dir = data_path("models/" + model_name);
  std::mt19937_64 rng(21);
  auto model = llama::load_model(dir, device, make_linear_factory(m, rng));
  const auto tok = load_tokenizer(dir);
  data::DataConfig cfg;
  cfg.train = {{data_path("alpaca/alpaca_small.json")}};
  cfg.val_fraction = 0.05;
  cfg.seq = 128;
  cfg.batch_rows = 2;
  cfg.seed = 5;
  // The held-out records, always the same 8 batches.
  auto val_loader = data::DataLoader::validation(cfg, *tok);
  std::vector<ModelBatch> val;
  while (val.size() < 8)
    if (auto b = val_loader.next()) val.push_back(data::to_model_batch(*b, device));
    else break;
  auto val_loss = [&] {
    double sum = 0, tokens = 0;
    for (const ModelBatch& b : val) {
      const LossSums s = model->evaluate(b);
      sum += s.loss_sum, tokens += double(s.tokens);
    }
    return sum / tokens;
  };
  const double before = val_loss();
  {
    // The method's calibration (if any) on the first training batch, which training then sees
    // again (finetune restores the data position after calibrating).
    auto calib = data::DataLoader::training(cfg, *tok);
    run_calibration(*model, [&]() -> std::optional<ModelBatch> {
      auto next = calib.next();
      if (!next) return std::nullopt;
      return data::to_model_batch(*next, device);
    });
  }
  auto train = data::DataLoader::training(cfg, *tok);
  AdamW opt(model->params(), {});
  for (int s = 0; s < steps; ++s) {
    auto next = train.next();
    if (!next) throw Error(cat("method quality: alpaca_small ran out after ", s, " steps"));
    const ModelBatch b = data::to_model_batch(*next, device);
    model->forward_backward(b, 1.0f / float(std::max<int64_t>(1, b.target_count)));
    opt.clip_grad_norm(1.0);
    opt.step(lr);
    model->after_step();
  }
  return {before, val_loss()};
}

void expect_methods_near_lora(const std::string& model, Device device, int steps,
                              double tolerance) {
  const ValLoss ref = trained_val_loss(model, lora_reference().options, steps, device);
  std::printf("%s on %s, %d steps: lora val loss %.4f -> %.4f\n", model.c_str(),
              device.str().c_str(), steps, ref.before, ref.after);
  ASSERT_LT(ref.after, 0.9 * ref.before) << "LoRA did not learn the data: the comparison means nothing";
  for (const QualityMethod& q : low_precision_methods()) {
    const ValLoss got = trained_val_loss(model, q.options, steps, device, 1e-3 * q.lr_scale);
    const double rel = (got.after - ref.after) / ref.after;
    std::printf("| %s | %s | %s | %.4f | %+.2f%% |%s\n", model.c_str(), device.str().c_str(),
                q.name.c_str(), got.after, 100.0 * rel, q.held_to_bound ? "" : " (reported only)");
    ::testing::Test::RecordProperty(model + "/" + q.name, std::to_string(got.after));
    EXPECT_LT(got.after, got.before) << q.name << " did not learn";
    if (q.held_to_bound) {
      EXPECT_LT(std::abs(rel), q.bound > 0 ? q.bound : tolerance)
          << q.name << ": " << got.after << " vs lora " << ref.after;
    }
  }
}

}  // namespace loft::test
