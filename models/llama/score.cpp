#include "models/llama/score.h"

#include <algorithm>
#include <cmath>

#include "models/llama/decode.h"
#include "models/llama/sampling.h"

namespace loft::llama {

ScoreRequest continuation_request(const std::vector<int32_t>& context,
                                  const std::vector<int32_t>& continuation) {
  LOFT_CHECK(!context.empty() && !continuation.empty(),
             "continuation_request: context and continuation must be non-empty");
  ScoreRequest r;
  r.tokens = context;
  r.tokens.insert(r.tokens.end(), continuation.begin(), continuation.end() - 1);
  for (size_t i = 0; i < continuation.size(); ++i) {
    r.positions.push_back(int64_t(context.size() + i) - 1);
    r.targets.push_back(continuation[i]);
  }
  return r;
}

namespace {

// log softmax(row)[target] in double over fp32 logits.
double log_prob(const float* row, int64_t vocab, int32_t target) {
  LOFT_CHECK(target >= 0 && target < vocab, "loglikelihood: target id ", target,
             " is outside the vocabulary [0, ", vocab, ")");
  float m = row[0];
  for (int64_t i = 1; i < vocab; ++i) m = std::max(m, row[i]);
  double s = 0;
  for (int64_t i = 0; i < vocab; ++i) s += std::exp(double(row[i]) - m);
  return double(row[target]) - m - std::log(s);
}

void add_target(Score& s, const float* row, int64_t vocab, int32_t target) {
  const double lp = log_prob(row, vocab, target);
  s.logprobs.push_back(lp);
  s.sum += lp;
  s.greedy = s.greedy && argmax(row, vocab) == target;
}

// Rows of logits a wave may bring back at once (~256 MiB of F32).
int64_t row_budget(int64_t vocab) { return std::max<int64_t>(1, (int64_t(1) << 26) / vocab); }

}  // namespace

CachedPrefix cache_prefix(LlamaModel& model, KvCache& cache, int64_t slot,
                          std::vector<int32_t> tokens, const CachedPrefix* parent) {
  size_t skip = 0;
  if (parent) {
    LOFT_CHECK(tokens.size() > parent->tokens.size() &&
                   std::equal(parent->tokens.begin(), parent->tokens.end(), tokens.begin()),
               "cache_prefix: the tokens do not extend the parent prefix");
    cache.copy_prefix(parent->slot, slot, int64_t(parent->tokens.size()));
    skip = parent->tokens.size();
  } else {
    LOFT_CHECK(!tokens.empty(), "cache_prefix: no tokens");
    cache.clear(slot);
  }
  const Tensor logits = decode_step(
      model, cache, {Feed::last(slot, std::vector<int32_t>(tokens.begin() + int64_t(skip), tokens.end()))});
  CachedPrefix p{slot, std::move(tokens), logits.to_float_vector()};
  return p;
}

std::vector<Score> loglikelihood(LlamaModel& model, KvCache& cache,
                                 const std::vector<ScoreRequest>& requests,
                                 const CachedPrefix* prefix, std::vector<int64_t> slots) {
  const int64_t start = prefix ? int64_t(prefix->tokens.size()) : 0;
  if (slots.empty())
    for (int64_t s = 0; s < cache.slots(); ++s)
      if (!prefix || s != prefix->slot) slots.push_back(s);
  LOFT_CHECK(!slots.empty(), "loglikelihood: the KV cache has no slot besides the prefix's");
  for (int64_t s : slots) {
    cache.length(s);  // exists
    LOFT_CHECK(!prefix || s != prefix->slot, "loglikelihood: slot ", s, " holds the prefix");
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    const ScoreRequest& r = requests[i];
    const int64_t n = int64_t(r.tokens.size());
    LOFT_CHECK(r.positions.size() == r.targets.size(), "loglikelihood: request ", i, " has ",
               r.positions.size(), " positions but ", r.targets.size(), " targets");
    LOFT_CHECK(n > 0 && n >= start, "loglikelihood: request ", i, " has ", n,
               " tokens, fewer than the prefix's ", start);
    if (n > cache.max_len())
      throw Error(cat("loglikelihood: request ", i, " has ", n, " tokens but the KV cache holds ",
                      cache.max_len(), " per sequence (make it larger or the request shorter)"));
    if (prefix)
      LOFT_CHECK(std::equal(prefix->tokens.begin(), prefix->tokens.end(), r.tokens.begin()),
                 "loglikelihood: request ", i, " does not start with the cached prefix");
    for (int64_t p : r.positions)
      LOFT_CHECK(p >= std::max<int64_t>(start - 1, 0) && p < n, "loglikelihood: request ", i,
                 " scores position ", p, ", outside [", std::max<int64_t>(start - 1, 0), ", ", n,
                 ")");
  }

  std::vector<Score> out(requests.size());
  const int64_t budget = row_budget(model.config().vocab_size);
  size_t next = 0;
  while (next < requests.size()) {
    // One wave: as many requests as there are slots and the row budget allows (at least one).
    std::vector<Feed> feeds;
    std::vector<size_t> which;
    int64_t rows = 0;
    while (next < requests.size() && feeds.size() < slots.size()) {
      const ScoreRequest& r = requests[next];
      if (int64_t(r.tokens.size()) == start) {  // nothing after the prefix: its last row scores all
        for (int32_t target : r.targets)
          add_target(out[next], prefix->last_logits.data(), int64_t(prefix->last_logits.size()), target);
        ++next;
        continue;
      }
      if (!feeds.empty() && rows + int64_t(r.positions.size()) > budget) break;
      Feed f{slots[feeds.size()], {r.tokens.begin() + start, r.tokens.end()}, {}};
      for (int64_t p : r.positions)
        if (p >= start) f.rows.push_back(p - start);  // p = start - 1 is the prefix's last row
      rows += int64_t(f.rows.size());
      if (prefix) cache.copy_prefix(prefix->slot, f.slot, start);
      else cache.clear(f.slot);
      feeds.push_back(std::move(f));
      which.push_back(next++);
    }
    if (feeds.empty()) continue;
    const Tensor logits = decode_step(model, cache, feeds);
    const int64_t vocab = logits.size(1);
    int64_t row = 0;
    for (size_t w = 0; w < which.size(); ++w) {
      const ScoreRequest& r = requests[which[w]];
      for (size_t t = 0; t < r.targets.size(); ++t) {
        const float* lr = r.positions[t] < start ? prefix->last_logits.data()
                                                 : logits.ptr<float>() + (row++) * vocab;
        add_target(out[which[w]], lr, vocab, r.targets[t]);
      }
      cache.clear(feeds[w].slot);
    }
  }
  return out;
}

}  // namespace loft::llama
