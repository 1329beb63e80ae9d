// Sampling on the host: greedy and its ties, top-k = 1 is greedy, the top-p cut and the draw on a
// small example worked by hand, the seed's determinism, and generation with a seed.
#include <cmath>

#include "models/llama/generate.h"
#include "models/llama/sampling.h"
#include "tests/common/decode_check.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

using namespace llama;

// Logits whose softmax at temperature 1 is {0.05, 0.5, 0.15, 0.3} (ids 0..3).
std::vector<float> four() {
  return {std::log(0.05f), std::log(0.5f), std::log(0.15f), std::log(0.3f)};
}

TEST(Sampling, GreedyIsTheFirstMaximum) {
  const std::vector<float> l = {1.0f, 3.0f, -2.0f, 3.0f, NAN};
  EXPECT_EQ(argmax(l.data(), 5), 1);
  EXPECT_EQ(sample_token(l.data(), 5, {}, 0.99), 1);
  SamplingOptions k1{.temperature = 5.0, .top_k = 1};
  for (double u : {0.0, 0.5, 0.999}) EXPECT_EQ(sample_token(l.data(), 5, k1, u), 1);
}

// By hand: ordered by probability, ids 1 (0.5), 3 (0.3), 2 (0.15), 0 (0.05). top_p = 0.7 keeps
// 1 (mass before it 0 < 0.7) and 3 (0.5 < 0.7) but not 2 (0.8 >= 0.7); renormalised {1: 0.625,
// 3: 0.375}. So a draw u < 0.625 gives 1, above gives 3.
TEST(Sampling, TopPCutMatchesAHandWorkedExample) {
  const auto l = four();
  SamplingOptions p{.temperature = 1.0, .top_p = 0.7};
  EXPECT_EQ(sample_token(l.data(), 4, p, 0.0), 1);
  EXPECT_EQ(sample_token(l.data(), 4, p, 0.62), 1);
  EXPECT_EQ(sample_token(l.data(), 4, p, 0.63), 3);
  EXPECT_EQ(sample_token(l.data(), 4, p, 0.999), 3);
  // top_p = 0.85 keeps 2 as well (mass before it 0.8): {0.5, 0.3, 0.15}/0.95; 0.8/0.95 = 0.842.
  p.top_p = 0.85;
  EXPECT_EQ(sample_token(l.data(), 4, p, 0.84), 3);
  EXPECT_EQ(sample_token(l.data(), 4, p, 0.85), 2);
  EXPECT_EQ(sample_token(l.data(), 4, p, 0.9999), 2);
  // No cut: the whole distribution in id order, {0.05, 0.5, 0.15, 0.3}.
  p.top_p = 1.0;
  EXPECT_EQ(sample_token(l.data(), 4, p, 0.04), 0);
  EXPECT_EQ(sample_token(l.data(), 4, p, 0.06), 1);
  EXPECT_EQ(sample_token(l.data(), 4, p, 0.69), 2);
  EXPECT_EQ(sample_token(l.data(), 4, p, 0.71), 3);
  // top_k = 2 keeps {1, 3} and renormalises like the top-p cut above.
  SamplingOptions k{.temperature = 1.0, .top_k = 2};
  EXPECT_EQ(sample_token(l.data(), 4, k, 0.62), 1);
  EXPECT_EQ(sample_token(l.data(), 4, k, 0.63), 3);
  // Temperature 0.5 squares the odds: {0.25, 0.09}/0.34 -> 1 below 0.735.
  k.temperature = 0.5;
  EXPECT_EQ(sample_token(l.data(), 4, k, 0.73), 1);
  EXPECT_EQ(sample_token(l.data(), 4, k, 0.74), 3);
}

// A top-p cut that reaches past the first sorted block of 1024 candidates.
TEST(Sampling, TopPBeyondTheFirstSortedBlock) {
  std::vector<float> flat(5000, 0.0f);
  flat[4321] = 0.001f;  // the single most likely token
  SamplingOptions p{.temperature = 1.0, .top_p = 0.9};
  EXPECT_EQ(sample_token(flat.data(), 5000, p, 0.0), 4321);
  // 0.9 of the mass is ~4500 tokens; the draw at 0.999 of it lands past the first 1024.
  const int32_t t = sample_token(flat.data(), 5000, p, 0.999);
  EXPECT_GE(t, 0);
  EXPECT_LT(t, 5000);
}

TEST(Sampling, DrawsDependOnSeedSequenceAndStepOnly) {
  EXPECT_EQ(sampling_uniform(7, 3, 11), sampling_uniform(7, 3, 11));
  EXPECT_NE(sampling_uniform(7, 3, 11), sampling_uniform(8, 3, 11));
  EXPECT_NE(sampling_uniform(7, 3, 11), sampling_uniform(7, 4, 11));
  EXPECT_NE(sampling_uniform(7, 3, 11), sampling_uniform(7, 3, 12));
  double mean = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = sampling_uniform(1, 0, uint64_t(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    mean += u / 10000;
  }
  EXPECT_NEAR(mean, 0.5, 0.01);
  EXPECT_THROW(validate({.temperature = -1}), Error);
  EXPECT_THROW(validate({.top_k = -1}), Error);
  EXPECT_THROW(validate({.top_p = 1.5}), Error);
}

TEST(Sampling, SameSeedSameTokensAndTopK1IsGreedy) {
  auto model = test::decode_test_model("stories260K-hf", Device::cpu(), DType::F32);
  KvCache cache = KvCache::for_model(*model, 3, 64);
  KvCache one = KvCache::for_model(*model, 1, 64);
  const std::vector<std::vector<int32_t>> prompts = {{1}, {1, 403, 407}, {1, 300}};
  GenerateOptions opt;
  opt.max_new_tokens = 30;
  opt.sampling = {.temperature = 1.0, .top_k = 40, .top_p = 0.95, .seed = 42};
  const auto a = generate(*model, cache, prompts, opt);
  const auto b = generate(*model, one, prompts, opt);  // other batching, same draws
  opt.sampling.seed = 43;
  const auto c = generate(*model, cache, prompts, opt);
  bool differs = false;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << i;
    differs = differs || a[i].tokens != c[i].tokens;
  }
  EXPECT_TRUE(differs) << "another seed drew the same 90 tokens";

  opt.sampling = {.temperature = 1.3, .top_k = 1, .seed = 5};
  const auto k1 = generate(*model, cache, prompts, opt);
  opt.sampling = {};
  const auto greedy = generate(*model, cache, prompts, opt);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(k1[i].tokens, greedy[i].tokens) << i;
}

}  // namespace
}  // namespace loft
