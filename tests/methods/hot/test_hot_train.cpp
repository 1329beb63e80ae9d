// HOT trains stories260K on the CPU through a linear factory built here (the method is not yet
// registered): LoRA on all seven projections around HotWeight, with and without LQS, against
// plain LoRA on the same batches. stories260K's gate/up have out = 172, so its Hadamard block
// there is 4 (the padded, non-multiple-of-16 case). HOT's losses are means over eight SR seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "engine/methods/hot/hot_weight.h"
#include "engine/optim/adamw.h"
#include "engine/peft/lora_linear.h"
#include "models/llama/loading.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

ModelBatch gram_batch(int64_t vocab, int gram_seed, int noise_seed) {
  std::mt19937 g{uint32_t(gram_seed)}, noise{uint32_t(noise_seed + 100)};
  std::vector<int32_t> gram(8), ids(2 * 64);
  for (auto& t : gram) t = int32_t(g() % uint32_t(vocab));
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = (i % 11 == 0) ? int32_t(noise() % uint32_t(vocab)) : gram[i % 8];
  return make_batch(ids, ids, {}, 2, 64, Device::cpu());
}

struct HotRun {
  double first = 0, last = 0;
  size_t hot_layers = 0;  // HotWeights built
  int per_token = 0;      // of them, those on per-token scales after training
  uint32_t micro_step = 0;
};

// hot: LoRA r=8 around HotWeight (else plain LoRA); lqs: one calibration batch before step 0;
// seed: the SR key.
HotRun train(bool hot, bool lqs, int steps, uint64_t seed = 5) {
  std::mt19937_64 rng(21);
  LoraOptions lo;
  lo.rank = 8;
  lo.alpha = 16;
  HotOptions ho;
  ho.seed = seed;
  HotRun run;
  std::vector<HotWeight*> hws;  // owned by the model
  LinearFactory factory = [&](const std::string& name, const std::string&,
                              WeightSource w) -> std::unique_ptr<AdaptedLinear> {
    if (!hot) return std::make_unique<LoraLinear>(name, dense_weight(w.dense()), lo, rng);
    auto hw = hot_weight(w, ho, hot_site_of(name));
    hws.push_back(hw.get());
    return std::make_unique<LoraLinear>(name, std::move(hw), lo, rng);
  };
  auto model = llama::load_model(test::data_path("models/stories260K-hf"), Device::cpu(),
                                 factory);
  const int64_t vocab = model->config().vocab_size;
  if (lqs) {
    for (HotWeight* h : hws) h->begin_calibration();
    const ModelBatch cal = gram_batch(vocab, 9, 999);
    model->forward_backward(cal, 1.0f / float(cal.target_count));
    for (HotWeight* h : hws) h->end_calibration();
    for (Param* p : model->params()) p->grad.zero_();
  }
  const ModelBatch probe = gram_batch(vocab, 0, 1000);
  const LossSums l0 = model->evaluate(probe);
  AdamW opt(model->params(), {});
  for (int s = 0; s < steps; ++s) {
    const ModelBatch b = gram_batch(vocab, s % 4, s);
    model->forward_backward(b, 1.0f / float(b.target_count));
    opt.clip_grad_norm(3.0);
    opt.step(1e-2);
    model->after_step();
  }
  const LossSums l1 = model->evaluate(probe);
  run.first = l0.loss_sum / double(l0.tokens);
  run.last = l1.loss_sum / double(l1.tokens);
  run.hot_layers = hws.size();
  for (HotWeight* h : hws) run.per_token += h->scale() == quant::HotScale::PerToken;
  if (!hws.empty()) run.micro_step = hws[0]->micro_step();
  return run;
}

// HOT's final loss over several SR seeds. One seed's loss spreads by about ±0.15 here (docs/methods.md),
// and the spread is also where machines differ: the dense GEMMs round differently under each BLAS
// kernel (OPENBLAS_CORETYPE), which moves every stochastic-rounding draw after the first step.
struct HotSeeds {
  HotRun run;  // the first seed's, for the counts
  std::vector<double> lasts;
  double mean() const { return std::accumulate(lasts.begin(), lasts.end(), 0.0) / double(lasts.size()); }
  double sd() const {  // sample standard deviation
    double ss = 0;
    for (double x : lasts) ss += (x - mean()) * (x - mean());
    return std::sqrt(ss / double(lasts.size() - 1));
  }
};
constexpr int kSeeds = 8;
// Student's t at 99.5%, kSeeds - 1 = 7 degrees of freedom (two-sided 1%).
constexpr double kT7 = 3.499;

HotSeeds train_seeds(bool lqs, int steps) {
  HotSeeds m;
  for (uint64_t seed = 1; seed <= uint64_t(kSeeds); ++seed) {
    const HotRun r = train(true, lqs, steps, seed);
    if (seed == 1) m.run = r;
    m.lasts.push_back(r.last);
  }
  return m;
}

// The claim under test: HOT's expected final loss (over SR seeds) is within 5% of LoRA's. The mean of
// kSeeds runs rejects it only when it lies further than t·sd/sqrt(n) beyond the 5% band: a two-sided
// t-test at 1%, so a machine whose BLAS moves the draws fails it with probability 1% when the claim
// holds, and a method that really trains worse fails it every time (the margin is the measured
// spread's, printed below, not a number chosen to pass).
void expect_like_lora(const char* what, const HotSeeds& s, double lora) {
  const double margin = kT7 * s.sd() / std::sqrt(double(kSeeds));
  std::printf("%s: mean %.4f, sd %.4f over %d seeds (min %.4f, max %.4f); |mean - lora| = %.2f%% of lora, "
              "allowed 5%% + %.2f%% (t * standard error)\n",
              what, s.mean(), s.sd(), kSeeds, *std::min_element(s.lasts.begin(), s.lasts.end()),
              *std::max_element(s.lasts.begin(), s.lasts.end()), 100 * std::fabs(s.mean() - lora) / lora,
              100 * margin / lora);
  EXPECT_LT(std::fabs(s.mean() - lora), 0.05 * lora + margin) << what;
}

TEST(HotTraining, LossFallsLikeLorasOnStories260K) {
  const int kSteps = 40;
  const HotRun lora = train(false, false, kSteps);
  const HotSeeds hot = train_seeds(false, kSteps), hot_lqs = train_seeds(true, kSteps);
  std::printf("probe loss %.4f -> lora %.4f\n", lora.first, lora.last);
  EXPECT_EQ(hot.run.first, lora.first) << "the forward is the dense backbone's";
  EXPECT_LT(lora.last, lora.first - 0.5);
  expect_like_lora("hot", hot, lora.last);
  expect_like_lora("hot+lqs", hot_lqs, lora.last);
  EXPECT_EQ(hot.run.hot_layers, 35u) << "5 layers × 7 projections";
  EXPECT_EQ(hot.run.micro_step, uint32_t(kSteps));
  EXPECT_EQ(hot.run.per_token, 35) << "per token unless LQS says otherwise";
  std::printf("LQS chose per token for %d of %zu projections\n", hot_lqs.run.per_token,
              hot_lqs.run.hot_layers);
}

}  // namespace
}  // namespace loft
