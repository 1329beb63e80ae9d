// Llama inference through a KV cache (kv_cache.h): the one step that prefill, token-by-token
// decoding, continuation scoring (score.h) and generation (generate.h) are built from.
//
// A step feeds each of several sequences (cache slots) some new tokens, appended after what its
// slot holds, at RoPE positions length(slot), length(slot)+1, ... The tokens of all feeds run as
// one ragged batch of T tokens through every projection's AdaptedLinear forward (so base, LoRA,
// QLoRA, FALQON and HALO models all decode, with nothing saved for a backward). Per layer the new
// keys and values are written into the cache, then attention runs:
//   - every fed slot empty (a prefill): ops::attention over one packed row in which each feed is a
//     document — exactly the training forward's attention, on CUDA the flash kernel where it fits;
//   - otherwise: ops::cached_attention of the new queries against their slots' caches.
// A sliding window (LlamaConfig::sliding_window) narrows both as training does; the cache still
// holds every position (its size does not shrink to the window).
// Only the rows whose logits are asked for go through the final norm and lm_head.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/tensor/tensor.h"
#include "models/llama/kv_cache.h"
#include "models/llama/model.h"

namespace loft::llama {

// One sequence's part of a step.
struct Feed {
  int64_t slot = 0;
  std::vector<int32_t> tokens;  // appended to the slot; at least one
  std::vector<int64_t> rows;    // indices into `tokens` whose logits the step returns, in order

  // Feeds `tokens` to `slot`, asking for the last token's logits (prefill and decode).
  static Feed last(int64_t slot, std::vector<int32_t> tokens);
};

// Runs one step: returns logits F32 [R, vocab] on the CPU, R = Σ feeds' rows, feed by feed. Each
// feed's slot then holds its tokens too. Slots must be distinct within a step; a feed that does
// not fit its slot (KvCache::check_room) or an out-of-vocabulary token is an Error raised before
// the cache changes. When a step fails midway, no slot's length has changed (the positions past it
// may hold partial keys; they are overwritten by the next step).
Tensor decode_step(LlamaModel& model, KvCache& cache, const std::vector<Feed>& feeds);
// The same step with the logits left on the model's device (greedy decoding takes their argmax
// there: ops::argmax_rows).
Tensor decode_logits(LlamaModel& model, KvCache& cache, const std::vector<Feed>& feeds);

}  // namespace loft::llama
