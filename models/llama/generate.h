// Batched generation with a KV cache: every prompt is prefilled, then each sequence gets one
// token per step until it produces an EOS id, reaches max_new_tokens, or the caller stops it.
// Sequences finish independently; a finished sequence frees its cache slot for the next waiting
// prompt (continuous batching), so any number of prompts runs through a cache of a few slots.
// Newly admitted prompts are prefilled together in one step (packed, flash attention on CUDA),
// then every running sequence decodes one token in the next.
//
// Stop strings are the caller's: on_token sees each new token of each sequence as it is chosen
// (EOS included) and returns false to stop that sequence there (e.g. once the decoded text holds
// "Question:"); the token it was shown stays in the output.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "models/llama/kv_cache.h"
#include "models/llama/model.h"
#include "models/llama/sampling.h"

namespace loft::llama {

struct GenerateOptions {
  int64_t max_new_tokens = 256;
  SamplingOptions sampling;      // greedy by default
  std::vector<int32_t> eos_ids;  // stop a sequence when it produces any of these (kept in output)
};

enum class StopReason { Eos, MaxTokens, Caller };
const char* stop_reason_name(StopReason r);  // "eos", "max_tokens", "caller"

struct Generation {
  std::vector<int32_t> tokens;  // generated ids, the prompt not included
  StopReason stop = StopReason::MaxTokens;
};

// Called with (index of the prompt, new token); false stops that sequence after this token.
using OnToken = std::function<bool(size_t sequence, int32_t token)>;

// Generates a continuation of every prompt (non-empty id lists), in prompt order. Each prompt
// needs prompt.size() + max_new_tokens positions of the cache: a longer request is an Error
// naming the prompt and the cache's size, raised before any work. Sampling draws depend on
// (seed, prompt index, token index) only, so a seed gives the same tokens for any cache size or
// batch composition (up to the backend's rounding of the logits themselves). The cache's slots
// are cleared before use and left empty.
std::vector<Generation> generate(LlamaModel& model, KvCache& cache,
                                 const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerateOptions& options, const OnToken& on_token = {});

}  // namespace loft::llama
