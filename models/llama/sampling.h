// Choosing the next token from a row of logits, on the host (the reference for every backend:
// the decoder brings each step's logits rows to the CPU). Transformers' order: temperature, then
// top-k, then top-p (nucleus), then one draw from what is left, renormalised.
#pragma once
#include <cstdint>

namespace loft::llama {

struct SamplingOptions {
  double temperature = 0.0;  // 0 = greedy (argmax; ties go to the lowest id)
  int64_t top_k = 0;         // keep the k most likely tokens; 0 = all
  double top_p = 1.0;        // keep the fewest most likely tokens whose mass reaches top_p; 1 = all
  uint64_t seed = 0;         // with the sequence's index and the token's, fixes every draw

  bool greedy() const { return temperature <= 0.0; }
};

// Throws an Error naming the option when one is out of range (temperature < 0, top_k < 0,
// top_p outside (0, 1]).
void validate(const SamplingOptions& opt);

// The draw for token `step` of sequence `sequence`: a uniform double in [0, 1) that depends on
// (seed, sequence, step) only, never on how sequences were batched.
double sampling_uniform(uint64_t seed, uint64_t sequence, uint64_t step);

// argmax of logits[0..vocab) (the lowest id among equal maxima; NaN never wins).
int32_t argmax(const float* logits, int64_t vocab);

// The token chosen from logits[0..vocab) with draw u in [0, 1): greedy when opt.greedy();
// otherwise tokens ordered by logit (descending, ties by id), probabilities softmax(logits / T)
// over the top_k kept, then the shortest prefix whose mass reaches top_p (the token that crosses
// it included, so at least one), renormalised, and the first token whose cumulative probability
// exceeds u · (kept mass), walking the kept tokens in that order (in id order when neither top_k
// nor top_p is set: the same distribution without a sort). top_k = 1 is greedy for any
// temperature.
int32_t sample_token(const float* logits, int64_t vocab, const SamplingOptions& opt, double u);

}  // namespace loft::llama
