#include "models/llama/decode.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "engine/ops/kv_cache_ops.h"
#include "engine/ops/ops.h"
#include "models/llama/sliding_window.h"

namespace loft::llama {

Feed Feed::last(int64_t slot, std::vector<int32_t> tokens) {
  Feed f{slot, std::move(tokens), {}};
  if (!f.tokens.empty()) f.rows = {int64_t(f.tokens.size()) - 1};
  return f;
}

namespace {

// The step's tokens, flattened feed by feed, with each token's slot, cache position (= RoPE
// position), the index of its feed's first token (its document in a prefill), and the flat indices
// of the rows whose logits are returned.
struct StepLayout {
  std::vector<int32_t> ids, slots, pos, doc_start, rows;
  bool prefill = true;
  // Per feed: its slot, first position and token count (the runs of ops::make_query_tiles).
  std::vector<int32_t> run_slot, run_start, run_count;
  int64_t longest = 0;  // tokens of the longest feed
};

StepLayout layout_of(const KvCache& cache, const std::vector<Feed>& feeds, int64_t vocab) {
  StepLayout s;
  std::set<int64_t> seen;
  for (size_t f = 0; f < feeds.size(); ++f) {
    const Feed& feed = feeds[f];
    const int64_t n = int64_t(feed.tokens.size());
    LOFT_CHECK(n > 0, "decode_step: feed ", f, " (slot ", feed.slot, ") has no tokens");
    LOFT_CHECK(seen.insert(feed.slot).second, "decode_step: slot ", feed.slot,
               " is fed twice in one step");
    cache.check_room(feed.slot, n);
    const int64_t start = cache.length(feed.slot), first = int64_t(s.ids.size());
    if (start > 0) s.prefill = false;
    s.run_slot.push_back(int32_t(feed.slot));
    s.run_start.push_back(int32_t(start));
    s.run_count.push_back(int32_t(n));
    s.longest = std::max(s.longest, n);
    for (int64_t j = 0; j < n; ++j) {
      const int32_t id = feed.tokens[size_t(j)];
      LOFT_CHECK(id >= 0 && id < vocab, "decode_step: feed ", f, " token ", j, " has id ", id,
                 ", outside the vocabulary [0, ", vocab, ")");
      s.ids.push_back(id);
      s.slots.push_back(int32_t(feed.slot));
      s.pos.push_back(int32_t(start + j));
      s.doc_start.push_back(int32_t(first));
    }
    for (int64_t r : feed.rows) {
      LOFT_CHECK(r >= 0 && r < n, "decode_step: feed ", f, " asks for row ", r, " of its ", n,
                 " tokens");
      s.rows.push_back(int32_t(first + r));
    }
  }
  LOFT_CHECK(s.ids.size() < size_t(INT32_MAX), "decode_step: too many tokens in one step");
  return s;
}

Tensor ints(const std::vector<int32_t>& v, Device device) {
  return Tensor::from_vector(v, {int64_t(v.size())}, device);
}

}  // namespace

Tensor decode_step(LlamaModel& model, KvCache& cache, const std::vector<Feed>& feeds) {
  return decode_logits(model, cache, feeds).to(Device::cpu());
}

Tensor decode_logits(LlamaModel& model, KvCache& cache, const std::vector<Feed>& feeds) {
  const LlamaConfig& c = model.config();
  LOFT_CHECK(cache.layers() == c.num_layers && cache.k(0).size(2) == c.num_kv_heads &&
                 cache.k(0).size(3) == c.head_dim && cache.k(0).dtype() == model.compute_dtype() &&
                 cache.k(0).device() == model.device(),
             "decode_step: the KV cache ", cache.k(0).str(), " x ", cache.layers(),
             " layers does not fit the model (", c.num_layers, " layers, ", c.num_kv_heads,
             " kv heads of ", c.head_dim, ", ", dtype_name(model.compute_dtype()), " on ",
             model.device().str(), ")");
  if (feeds.empty()) return Tensor::empty({0, c.vocab_size}, DType::F32, model.device());
  StepLayout s = layout_of(cache, feeds, c.vocab_size);
  // A sliding window: the prefill's one packed row of T tokens narrowed as training narrows a
  // batch's, and cached_attention told the window (both: keys pos − W < j <= pos).
  if (s.prefill) apply_sliding_window(s.doc_start, int64_t(s.ids.size()), c.sliding_window);
  const Device dev = model.device();
  const int64_t T = int64_t(s.ids.size());
  const Tensor ids = ints(s.ids, dev), slots = ints(s.slots, dev), pos = ints(s.pos, dev);
  const Tensor doc_start = s.prefill ? ints(s.doc_start, dev) : Tensor();
  // Feeds of several tokens after a cached prefix (scoring continuations): attention by runs
  // (ops::cached_attention's tiles), so a run's cached keys are read once for all its queries. One
  // token per feed (decoding) takes the decode kernel.
  Tensor tiles;
  if (!s.prefill && s.longest > 1) {
    const std::vector<int32_t> t = ops::make_query_tiles(s.run_slot, s.run_start, s.run_count);
    tiles = Tensor::from_vector(t, {int64_t(t.size() / 4), 4}, dev);
  }
  const float scale = 1.0f / std::sqrt(float(c.head_dim));

  const LlamaModel::Attend attend = [&](int layer, const Tensor& q, const Tensor& k,
                                        const Tensor& v, Tensor& out) {
    Tensor &kc = cache.k(layer), &vc = cache.v(layer);
    ops::kv_cache_write(k, v, slots, pos, kc, vc);
    if (s.prefill) {
      Tensor lse = Tensor::empty({T, q.size(1)}, DType::F32, dev);
      ops::attention(q, k, v, doc_start, T, scale, out, lse);
    } else {
      ops::cached_attention(q, kc, vc, slots, pos, scale, out, tiles.defined() ? &tiles : nullptr,
                            c.sliding_window);
    }
  };
  const Tensor hidden = model.forward_hidden(ids, pos, attend);
  for (const Feed& f : feeds) cache.advance(f.slot, int64_t(f.tokens.size()));

  const int64_t R = int64_t(s.rows.size());
  if (R == 0) return Tensor::empty({0, c.vocab_size}, DType::F32, dev);
  Tensor picked = hidden;
  bool all_in_order = R == T;
  for (int64_t r = 0; all_in_order && r < R; ++r) all_in_order = s.rows[size_t(r)] == r;
  if (!all_in_order) {  // gather the asked rows: an embedding lookup with the hidden states as table
    picked = Tensor::empty({R, c.hidden_size}, hidden.dtype(), dev);
    ops::embedding(hidden, ints(s.rows, dev), picked);
  }
  return model.head_logits(picked);
}

}  // namespace loft::llama
