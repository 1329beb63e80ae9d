// Log-likelihood scoring on the CPU (f32): lm-evaluation-harness's MMLU 5-shot log-likelihoods
// and is_greedy of both shipped models (transformers, fp32) from the token ids it fed; the scores
// against log_softmax of a full forward; a cached prefix (and a prefix of a prefix) gives the same
// scores as scoring every request whole.
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "models/llama/score.h"
#include "tests/common/decode_check.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

using namespace llama;
using nlohmann::json;

std::vector<json> read_jsonl(const std::filesystem::path& p, size_t limit) {
  std::ifstream in(p);
  std::vector<json> out;
  for (std::string line; out.size() < limit && std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  EXPECT_FALSE(out.empty()) << p;
  return out;
}

// Each choice is scored on the (truncated) input lm-eval fed for it: the continuation's tokens
// are the input's last ones, predicted by the positions before them.
void check_mmlu(const std::string& name, size_t limit) {
  const auto dir = test::data_path("reference/eval");
  const auto tokens = read_jsonl(dir / (name + "-mmlu5_tokens.jsonl"), limit);
  const auto outputs = read_jsonl(dir / (name + "-mmlu5_outputs.jsonl"), limit);
  auto model = test::decode_test_model(name, Device::cpu(), DType::F32);
  std::vector<ScoreRequest> requests;
  std::vector<double> want;
  std::vector<bool> want_greedy;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const json& t = tokens[i];
    for (size_t c = 0; c < t["continuation_enc"].size(); ++c) {
      const auto cont = t["continuation_enc"][c].get<std::vector<int32_t>>();
      const auto input = t["inputs"][t["input_of_choice"][c].get<size_t>()].get<std::vector<int32_t>>();
      ScoreRequest r;
      r.tokens = input;
      const int64_t n = int64_t(input.size()), k = int64_t(cont.size());
      for (int64_t j = 0; j < k; ++j) {
        r.positions.push_back(n - k + j);
        r.targets.push_back(cont[size_t(j)]);
      }
      requests.push_back(std::move(r));
      want.push_back(outputs[i]["loglikelihoods"][c].get<double>());
      want_greedy.push_back(outputs[i]["is_greedy"][c].get<bool>());
    }
  }
  KvCache cache = KvCache::for_model(*model, 8, model->config().max_position_embeddings);
  const auto got = loglikelihood(*model, cache, requests);
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i].sum - want[i]));
    EXPECT_EQ(got[i].greedy, want_greedy[i]) << i;
  }
  ::testing::Test::RecordProperty("worst_abs_error", cat(worst));
  EXPECT_LT(worst, 1e-4) << name;
}

TEST(Score, Stories260kMmluReproducesLmEval) { check_mmlu("stories260K-hf", 40); }
TEST(Score, WideRandomMmluReproducesLmEval) {
  LOFT_REQUIRE_DATA("models/wide-random");
  check_mmlu("wide-random", 6);
}

// log_softmax of the full forward's rows, by hand.
double full_log_prob(LlamaModel& m, const std::vector<int32_t>& tokens, int64_t pos, int32_t target) {
  const int64_t n = int64_t(tokens.size());
  const auto l = m.logits(make_batch(tokens, tokens, {}, 1, n, Device::cpu())).slice(pos, 1).to_float_vector();
  double mx = l[0], s = 0;
  for (float x : l) mx = std::max(mx, double(x));
  for (float x : l) s += std::exp(double(x) - mx);
  return double(l[size_t(target)]) - mx - std::log(s);
}

TEST(Score, MatchesLogSoftmaxOfTheFullForwardWithAndWithoutAPrefix) {
  auto model = test::decode_test_model("gqa-llama3", Device::cpu(), DType::F32);
  const std::vector<int32_t> header = {1, 10, 11, 12, 13, 14, 15, 16};
  std::vector<int32_t> question = header;
  for (int32_t t : {20, 21, 22, 23}) question.push_back(t);
  std::vector<ScoreRequest> requests;
  for (const std::vector<int32_t>& cont : std::vector<std::vector<int32_t>>{{30}, {31, 32}, {33}, {34, 35, 36}})
    requests.push_back(continuation_request(question, cont));
  const ScoreRequest& r1 = requests[1];
  EXPECT_EQ(r1.tokens.size(), question.size() + 1);
  EXPECT_EQ(r1.positions, (std::vector<int64_t>{11, 12}));
  EXPECT_EQ(r1.targets, (std::vector<int32_t>{31, 32}));

  KvCache cache = KvCache::for_model(*model, 3, 32);  // fewer slots than requests: two waves
  const auto whole = loglikelihood(*model, cache, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    double sum = 0;
    for (size_t t = 0; t < requests[i].targets.size(); ++t) {
      const double lp = full_log_prob(*model, requests[i].tokens, requests[i].positions[t],
                                      requests[i].targets[t]);
      EXPECT_NEAR(whole[i].logprobs[t], lp, 1e-5) << i << " " << t;
      sum += lp;
    }
    EXPECT_NEAR(whole[i].sum, sum, 1e-5);
  }

  // The header cached once, the question cached on top of it, the four continuations forked.
  const CachedPrefix h = cache_prefix(*model, cache, 0, header);
  const CachedPrefix q = cache_prefix(*model, cache, 1, question, &h);
  EXPECT_EQ(cache.length(1), int64_t(question.size()));
  const auto forked = loglikelihood(*model, cache, requests, &q, {2});  // slot 0 keeps the header
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_NEAR(forked[i].sum, whole[i].sum, 1e-5) << i;
    EXPECT_EQ(forked[i].greedy, whole[i].greedy);
  }
  EXPECT_EQ(cache.length(1), int64_t(question.size()));  // the prefixes stay for the next requests
  EXPECT_EQ(cache.length(0), int64_t(header.size()));
  EXPECT_THROW(loglikelihood(*model, cache, requests, &q, {1}), Error);

  ScoreRequest other = requests[0];
  other.tokens[3] = 99;
  EXPECT_THROW(loglikelihood(*model, cache, {other}, &q), Error);
  ScoreRequest early = requests[0];
  early.positions = {2};
  EXPECT_THROW(loglikelihood(*model, cache, {early}, &q), Error);
  ScoreRequest too_long = continuation_request(std::vector<int32_t>(40, 3), {4});
  EXPECT_THROW(loglikelihood(*model, cache, {too_long}), Error);
}

}  // namespace
}  // namespace loft
