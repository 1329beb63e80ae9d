#include "models/llama/generate.h"

#include <algorithm>
#include <deque>

#include "engine/ops/kv_cache_ops.h"
#include "models/llama/decode.h"

namespace loft::llama {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::Eos: return "eos";
    case StopReason::MaxTokens: return "max_tokens";
    case StopReason::Caller: return "caller";
  }
  return "?";
}

namespace {

struct Running {
  size_t seq;      // prompt index
  int64_t slot;
  int32_t last;    // the latest token, not yet fed
};

class Generator {
 public:
  Generator(LlamaModel& model, KvCache& cache, const std::vector<std::vector<int32_t>>& prompts,
            const GenerateOptions& opt, const OnToken& on_token)
      : model_(model), cache_(cache), prompts_(prompts), opt_(opt), on_token_(on_token),
        out_(prompts.size()) {}

  std::vector<Generation> run() {
    for (size_t i = 0; i < prompts_.size(); ++i) waiting_.push_back(i);
    for (int64_t s = cache_.slots(); s-- > 0;) free_.push_back(s);
    cache_.clear_all();
    while (!waiting_.empty() || !running_.empty()) {
      admit();
      decode();
    }
    return std::move(out_);
  }

 private:
  // Prefills waiting prompts into free slots, in one step, and takes each one's first token.
  void admit() {
    std::vector<Feed> feeds;
    std::vector<Running> fresh;
    while (!waiting_.empty() && !free_.empty()) {
      const size_t seq = waiting_.front();
      waiting_.pop_front();
      const int64_t slot = free_.back();
      free_.pop_back();
      feeds.push_back(Feed::last(slot, prompts_[seq]));
      fresh.push_back({seq, slot, 0});
    }
    if (feeds.empty()) return;
    take(choose(decode_logits(model_, cache_, feeds), fresh), fresh);
  }

  // One token for every running sequence.
  void decode() {
    if (running_.empty()) return;
    std::vector<Feed> feeds;
    for (const Running& r : running_) feeds.push_back(Feed::last(r.slot, {r.last}));
    std::vector<Running> batch;
    batch.swap(running_);
    take(choose(decode_logits(model_, cache_, feeds), batch), batch);
  }

  // The next token of each row of logits (row i continues batch[i]). Greedy: the argmax on the
  // logits' device, so only the ids come back; otherwise a draw on the host.
  std::vector<int32_t> choose(const Tensor& logits, const std::vector<Running>& batch) {
    const int64_t rows = logits.size(0), vocab = logits.size(1);
    if (opt_.sampling.greedy() || opt_.sampling.top_k == 1) {
      Tensor ids = Tensor::empty({rows}, DType::I32, logits.device());
      ops::argmax_rows(logits, ids);
      const Tensor host = ids.to(Device::cpu());
      return {host.ptr<int32_t>(), host.ptr<int32_t>() + rows};
    }
    const Tensor host = logits.to(Device::cpu());
    std::vector<int32_t> tokens(static_cast<size_t>(rows), 0);
    for (size_t i = 0; i < batch.size(); ++i) {
      const Generation& g = out_[batch[i].seq];
      const double u = sampling_uniform(opt_.sampling.seed, batch[i].seq, g.tokens.size());
      tokens[i] = sample_token(host.ptr<float>() + int64_t(i) * vocab, vocab, opt_.sampling, u);
    }
    return tokens;
  }

  // Reports token i for batch[i], and keeps that sequence running or finishes it.
  void take(const std::vector<int32_t>& tokens, const std::vector<Running>& batch) {
    for (size_t i = 0; i < batch.size(); ++i) {
      Running r = batch[i];
      Generation& g = out_[r.seq];
      const int32_t tok = tokens[i];
      g.tokens.push_back(tok);
      const bool go_on = !on_token_ || on_token_(r.seq, tok);
      const bool eos = std::find(opt_.eos_ids.begin(), opt_.eos_ids.end(), tok) != opt_.eos_ids.end();
      if (eos || !go_on || int64_t(g.tokens.size()) >= opt_.max_new_tokens) {
        g.stop = eos ? StopReason::Eos : !go_on ? StopReason::Caller : StopReason::MaxTokens;
        cache_.clear(r.slot);
        free_.push_back(r.slot);
      } else {
        r.last = tok;
        running_.push_back(r);
      }
    }
  }

  LlamaModel& model_;
  KvCache& cache_;
  const std::vector<std::vector<int32_t>>& prompts_;
  const GenerateOptions& opt_;
  const OnToken& on_token_;
  std::vector<Generation> out_;
  std::deque<size_t> waiting_;
  std::vector<int64_t> free_;
  std::vector<Running> running_;
};

}  // namespace

std::vector<Generation> generate(LlamaModel& model, KvCache& cache,
                                 const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerateOptions& options, const OnToken& on_token) {
  validate(options.sampling);
  LOFT_CHECK(options.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got ",
             options.max_new_tokens);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int64_t need = int64_t(prompts[i].size()) + options.max_new_tokens;
    LOFT_CHECK(!prompts[i].empty(), "generate: prompt ", i, " is empty (give at least BOS)");
    if (need > cache.max_len())
      throw Error(cat("generate: prompt ", i, " has ", prompts[i].size(), " tokens and asks for ",
                      options.max_new_tokens, " new ones: ", need,
                      " positions, but the KV cache holds ", cache.max_len(),
                      " per sequence (make it larger or the request shorter)"));
  }
  if (options.max_new_tokens == 0) return std::vector<Generation>(prompts.size());
  return Generator(model, cache, prompts, options, on_token).run();
}

}  // namespace loft::llama
