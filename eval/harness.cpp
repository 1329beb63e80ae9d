#include "eval/harness.h"

#include "engine/core/error.h"

namespace loft::eval {

namespace {
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
}  // namespace

std::string rstrip(const std::string& s) {
  size_t e = s.size();
  while (e > 0 && is_space(s[e - 1])) --e;
  return s.substr(0, e);
}

std::string strip(const std::string& s) {
  size_t b = 0;
  while (b < s.size() && is_space(s[b])) ++b;
  return rstrip(s.substr(b));
}

EncodedPair encode_pair(const Tokenizer& tok, std::string context, std::string continuation) {
  return encode_pairs(tok, context, {continuation}).front();
}

std::vector<EncodedPair> encode_pairs(const Tokenizer& tok, const std::string& context,
                                      const std::vector<std::string>& continuations) {
  const std::string trimmed = rstrip(context), moved = context.substr(trimmed.size());
  const std::vector<int32_t> context_ids = tok.encode_with_special(trimmed);
  std::vector<EncodedPair> out;
  for (const std::string& continuation : continuations) {
    const std::vector<int32_t> whole = tok.encode_with_special(trimmed + moved + continuation);
    EncodedPair p;
    p.context = context_ids;
    if (p.context.size() <= whole.size())
      p.continuation.assign(whole.begin() + int64_t(p.context.size()), whole.end());
    out.push_back(std::move(p));
  }
  return out;
}

llama::ScoreRequest loglikelihood_request(const EncodedPair& pair, int64_t max_length) {
  const int64_t k = int64_t(pair.continuation.size());
  if (k == 0) throw Error("a continuation encodes to no tokens after its context");
  if (k > max_length)
    throw Error(cat("a continuation of ", k, " tokens does not fit the context length ", max_length));
  std::vector<int32_t> all = pair.context;
  all.insert(all.end(), pair.continuation.begin(), pair.continuation.end());
  const int64_t keep = std::min<int64_t>(int64_t(all.size()), max_length + 1);
  llama::ScoreRequest r;
  r.tokens.assign(all.end() - keep, all.end() - 1);
  const int64_t n = int64_t(r.tokens.size());
  for (int64_t j = 0; j < k; ++j) {
    r.positions.push_back(n - k + j);
    r.targets.push_back(pair.continuation[size_t(j)]);
  }
  return r;
}

std::vector<int32_t> generation_context(std::vector<int32_t> ids, int64_t max_length,
                                        int64_t max_gen_toks) {
  const int64_t keep = max_length - max_gen_toks;
  if (keep <= 0)
    throw UsageError(cat("--max-gen-toks ", max_gen_toks, " leaves no room for a prompt in the context length ",
                         max_length));
  if (int64_t(ids.size()) > keep) ids.erase(ids.begin(), ids.end() - keep);
  return ids;
}

}  // namespace loft::eval
