// Log-likelihood scoring through the KV cache (what MMLU-style evaluation needs): the
// log-softmax log-probability of chosen target tokens at chosen positions, summed per request,
// with lm-evaluation-harness's is_greedy. Requests run in waves of the cache's slots, each wave
// one packed prefill (decode.h), returning only the rows that predict targets. Requests with the
// same tokens (lm-eval's single-token continuations of one context) share one feed and one slot.
//
// Prefix sharing: cache_prefix() runs a prefix (e.g. an MMLU subject's few-shot header, or one
// question's context shared by its four continuations) once into a slot; loglikelihood() with
// that prefix forks every request's slot from it (KvCache::copy_prefix) and feeds only the tokens
// after it. A prefix can extend another prefix (header -> header + question).
#pragma once
#include <cstdint>
#include <vector>

#include "models/llama/kv_cache.h"
#include "models/llama/model.h"

namespace loft::llama {

// Target i is tokens-to-come targets[i], predicted by the logits after token positions[i] of
// `tokens` (positions ascending or not, each in [0, tokens.size())).
struct ScoreRequest {
  std::vector<int32_t> tokens;
  std::vector<int64_t> positions;
  std::vector<int32_t> targets;
};
// lm-eval's loglikelihood(context, continuation) on token ids: the model reads
// context + continuation[:-1] and each continuation token is predicted by the position before
// it. Both non-empty.
ScoreRequest continuation_request(const std::vector<int32_t>& context,
                                  const std::vector<int32_t>& continuation);

struct Score {
  std::vector<double> logprobs;  // per target, log-softmax in fp32 logits, summed in double
  double sum = 0;
  bool greedy = true;  // every target is its row's argmax
};

// A prefix held in cache slot `slot` (its first tokens.size() positions).
struct CachedPrefix {
  int64_t slot = 0;
  std::vector<int32_t> tokens;
  std::vector<float> last_logits;  // the logits after its last token: [vocab]
};
// Runs `tokens` into `slot` (emptied first). With `parent`, `tokens` must start with the parent's
// tokens: the slot is forked from the parent's and only the rest is fed.
CachedPrefix cache_prefix(LlamaModel& model, KvCache& cache, int64_t slot,
                          std::vector<int32_t> tokens, const CachedPrefix* parent = nullptr);

// Scores every request, in waves over `slots` (empty: every slot but the prefix's; name them to
// keep other cached prefixes, e.g. a subject header's, alive). With a prefix, every request must
// start with the prefix's tokens, and no target may be predicted before the prefix's last
// position (that row is last_logits; a request that is all prefix needs no slot). A request longer than the cache's max_len
// is an Error naming it. Leaves the used slots empty.
std::vector<Score> loglikelihood(LlamaModel& model, KvCache& cache,
                                 const std::vector<ScoreRequest>& requests,
                                 const CachedPrefix* prefix = nullptr,
                                 std::vector<int64_t> slots = {});

}  // namespace loft::llama
