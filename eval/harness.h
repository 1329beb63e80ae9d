// What lm-evaluation-harness's HF backend (commit 4e7e0d47) does between a prompt's text and the
// model, shared by the benchmarks (docs/evaluation.md §11-12).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/llama/score.h"
#include "tokenizer/tokenizer.h"

namespace loft::eval {

// The lm-eval commit whose behaviour loft reproduces (reported in every benchmark report).
inline constexpr const char* kLmEvalCommit = "4e7e0d47f33bc71070c1d38394bafbb52b117163";

// _encode_pair: the context's trailing whitespace moves to the continuation; whole =
// enc(ctx + cont), ctx_enc = enc(ctx) (both with the tokenizer's default specials, e.g. BOS), and
// continuation = whole[len(ctx_enc):]. The model reads context + continuation.
struct EncodedPair {
  std::vector<int32_t> context, continuation;
};
EncodedPair encode_pair(const Tokenizer& tok, std::string context, std::string continuation);
// encode_pair for several continuations of one context, encoding the context once.
std::vector<EncodedPair> encode_pairs(const Tokenizer& tok, const std::string& context,
                                      const std::vector<std::string>& continuations);

// The loglikelihood request lm-eval runs: input = (context + continuation)[-(max_length+1):][:-1]
// (left truncation drops BOS too), each continuation token predicted by the position before it.
// Throws when the continuation alone does not fit (max_length < its length).
llama::ScoreRequest loglikelihood_request(const EncodedPair& pair, int64_t max_length);

// generate_until's context: the last max_length - max_gen_toks ids (left truncation).
std::vector<int32_t> generation_context(std::vector<int32_t> ids, int64_t max_length,
                                        int64_t max_gen_toks);

// Python's str.rstrip() / str.strip() for ASCII whitespace.
std::string rstrip(const std::string& s);
std::string strip(const std::string& s);

}  // namespace loft::eval
