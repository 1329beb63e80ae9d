#include "models/llama/score.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/core/parallel.h"
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

// What scoring needs of one row of fp32 logits, computed once however many targets it predicts:
// its max, log Σ exp (in double) and argmax.
struct RowStats {
  const float* row = nullptr;
  int64_t vocab = 0;
  double log_sum = 0;
  float max = 0;
  int32_t argmax = 0;
};

RowStats row_stats(const float* row, int64_t vocab) {
  RowStats r{row, vocab};
  r.max = row[0];
  for (int64_t i = 1; i < vocab; ++i) r.max = std::max(r.max, row[i]);
  double s = 0;
  for (int64_t i = 0; i < vocab; ++i) s += std::exp(double(row[i]) - r.max);
  r.log_sum = std::log(s);
  r.argmax = argmax(row, vocab);
  return r;
}

// log softmax(row)[target] and whether target is the row's argmax.
void add_target(Score& s, const RowStats& r, int32_t target) {
  LOFT_CHECK(target >= 0 && target < r.vocab, "loglikelihood: target id ", target,
             " is outside the vocabulary [0, ", r.vocab, ")");
  const double lp = double(r.row[target]) - r.max - r.log_sum;
  s.logprobs.push_back(lp);
  s.sum += lp;
  s.greedy = s.greedy && r.argmax == target;
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

  // Requests that read the same tokens (lm-eval's single-token continuations " A".." D" of one
  // context) share one feed: its rows are the union of their scored positions.
  struct Group {
    std::vector<size_t> members;
    std::vector<int64_t> rows;  // ascending positions >= start, each fed back once
  };
  std::vector<Group> groups;
  {
    std::map<std::vector<int32_t>, size_t> seen;
    for (size_t i = 0; i < requests.size(); ++i) {
      const auto [it, fresh] = seen.emplace(requests[i].tokens, groups.size());
      if (fresh) groups.emplace_back();
      Group& g = groups[it->second];
      g.members.push_back(i);
      for (int64_t p : requests[i].positions)
        if (p >= start) g.rows.push_back(p - start);
    }
    for (Group& g : groups) {
      std::sort(g.rows.begin(), g.rows.end());
      g.rows.erase(std::unique(g.rows.begin(), g.rows.end()), g.rows.end());
    }
  }

  std::vector<Score> out(requests.size());
  const int64_t budget = row_budget(model.config().vocab_size);
  RowStats prefix_row;
  if (prefix) prefix_row = row_stats(prefix->last_logits.data(), int64_t(prefix->last_logits.size()));
  size_t next = 0;
  while (next < groups.size()) {
    // One wave: as many groups as there are slots and the row budget allows (at least one).
    std::vector<Feed> feeds;
    std::vector<size_t> which;
    int64_t rows = 0;
    while (next < groups.size() && feeds.size() < slots.size()) {
      const Group& g = groups[next];
      const ScoreRequest& r = requests[g.members.front()];
      if (g.rows.empty()) {  // every target predicted by the prefix's last row: nothing to feed
        for (size_t m : g.members)
          for (int32_t target : requests[m].targets) add_target(out[m], prefix_row, target);
        ++next;
        continue;
      }
      if (!feeds.empty() && rows + int64_t(g.rows.size()) > budget) break;
      rows += int64_t(g.rows.size());
      if (prefix) cache.copy_prefix(prefix->slot, slots[feeds.size()], start);
      else cache.clear(slots[feeds.size()]);
      feeds.push_back(Feed{slots[feeds.size()], {r.tokens.begin() + start, r.tokens.end()}, g.rows});
      which.push_back(next++);
    }
    if (feeds.empty()) continue;
    const Tensor logits = decode_step(model, cache, feeds);
    const int64_t vocab = logits.size(1);
    std::vector<RowStats> stats(size_t(logits.size(0)));
    parallel_for(logits.size(0), [&](int64_t i) { stats[size_t(i)] = row_stats(logits.ptr<float>() + i * vocab, vocab); });
    int64_t first_row = 0;
    for (size_t w = 0; w < which.size(); ++w) {
      const Group& g = groups[which[w]];
      for (size_t m : g.members) {
        const ScoreRequest& r = requests[m];
        for (size_t t = 0; t < r.targets.size(); ++t) {
          const int64_t p = r.positions[t];
          add_target(out[m],
                     p < start ? prefix_row
                               : stats[size_t(first_row + (std::lower_bound(g.rows.begin(), g.rows.end(), p - start) -
                                                           g.rows.begin()))],
                     r.targets[t]);
        }
      }
      first_row += int64_t(g.rows.size());
      cache.clear(feeds[w].slot);
    }
  }
  return out;
}

}  // namespace loft::llama
