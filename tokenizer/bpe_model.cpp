#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>

#include "engine/core/error.h"
#include "engine/io/json_read.h"
#include "tokenizer/utf8.h"

namespace loft {

BpeModel::BpeModel(std::vector<std::pair<std::string, int32_t>> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
                   const std::string& file)
    : opt_(std::move(options)) {
  int32_t end = 0;
  for (const auto& [tok, id] : vocab) end = std::max(end, id + 1);
  by_id_.resize(size_t(end));
  has_id_.assign(size_t(end), false);
  small_char_.assign(0x800, -1);
  vocab_.reserve(vocab.size());
  for (const auto& [tok, id] : vocab) {
    by_id_[size_t(id)] = tok;
    has_id_[size_t(id)] = true;
    if (!tok.empty() && size_t(utf8::char_length(uint8_t(tok[0]))) == tok.size()) {
      const char32_t cp = utf8::decode_char(tok);
      if (cp < small_char_.size()) small_char_[cp] = id;
    }
    vocab_.set(tok, id);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byte_ids_[b] = id(name);
  }
  if (opt_.unk_token) {
    const int32_t u = id(*opt_.unk_token);
    if (u < 0) throw Error(cat(file, ": model.unk_token ", brief(*opt_.unk_token), " is not in model.vocab"));
    unk_id_ = u;
  }
  const size_t prefix_len = opt_.continuing_subword_prefix.size();
  merges_.reserve(merges.size());
  merge_list_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t ia = id(a), ib = id(b);
    if (ia < 0 || ib < 0)
      throw Error(cat(file, ": merge ", rank, " (", brief(a), " ", brief(b), ") names token ", brief(ia < 0 ? a : b),
                      ", which is not in model.vocab"));
    if (b.size() < prefix_len || b.compare(0, prefix_len, opt_.continuing_subword_prefix) != 0)
      throw Error(cat(file, ": merge ", rank, " (", brief(a), " ", brief(b), "): the second token lacks the continuing_subword_prefix"));
    const std::string joined = a + b.substr(prefix_len);
    const int32_t merged = id(joined);
    if (merged < 0)
      throw Error(cat(file, ": merge ", rank, " ('", a, "' '", b, "') makes '", joined, "', which is not in model.vocab"));
    merges_.set(pair_key(ia, ib), {uint32_t(rank), merged});  // a repeated pair keeps its last rank
    merge_list_.emplace_back(ia, ib);
  }
}

int32_t BpeModel::id(std::string_view token) const {
  const int32_t* id = vocab_.find(token);
  return id ? *id : -1;
}

const std::string* BpeModel::token(int32_t id) const {
  if (id < 0 || id >= end_id() || !has_id_[size_t(id)]) return nullptr;
  return &by_id_[size_t(id)];
}

int32_t BpeModel::char_id(std::string_view ch, bool first, bool last) const {
  const bool affixed = (!first && !opt_.continuing_subword_prefix.empty()) || (last && !opt_.end_of_word_suffix.empty());
  if (!affixed) {
    if (ch.size() <= 2) {
      const char32_t cp = utf8::decode_char(ch);
      if (cp < small_char_.size()) return small_char_[cp];
    }
    return id(ch);
  }
  std::string s = first ? std::string() : opt_.continuing_subword_prefix;
  s += ch;
  if (last) s += opt_.end_of_word_suffix;
  return id(s);
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    uint32_t len;  // bytes; 0 once merged into its left neighbour
  };
  thread_local std::vector<Symbol> sym;
  sym.clear();
  const auto add = [&](int32_t id, uint32_t len) {
    const int32_t n = int32_t(sym.size());
    sym.push_back({id, n - 1, n + 1, len});
  };
  int32_t unk = -1;  // a pending unknown run: its id and bytes
  uint32_t unk_len = 0;
  for (size_t i = 0; i < word.size();) {
    const size_t n = size_t(utf8::char_length(uint8_t(word[i])));
    const std::string_view ch = word.substr(i, n);
    const bool first = i == 0, last = i + n >= word.size();
    i += n;
    const int32_t id = char_id(ch, first, last);
    if (id >= 0) {
      if (unk >= 0) add(unk, unk_len), unk = -1;
      add(id, uint32_t(n));
      continue;
    }
    if (opt_.byte_fallback) {
      // The bytes of the character as looked up (prefix/suffix included), when all are tokens.
      std::string affixed = (!first ? opt_.continuing_subword_prefix : std::string()) + std::string(ch) +
                            (last ? opt_.end_of_word_suffix : std::string());
      bool all = true;
      for (const char c : affixed) all = all && byte_ids_[uint8_t(c)] >= 0;
      if (all) {
        for (const char c : affixed) add(byte_ids_[uint8_t(c)], 1);
        continue;
      }
    }
    if (unk_id_) {
      if (unk >= 0 && opt_.fuse_unk) {
        unk_len += uint32_t(n);
      } else {
        if (unk >= 0) add(unk, unk_len);
        unk = *unk_id_;
        unk_len = uint32_t(n);
      }
    }
    // Without an unk_token an unknown character is dropped, as tokenizers does.
  }
  if (unk >= 0) add(unk, unk_len);
  if (sym.empty()) return;
  sym.back().next = -1;

  // Lowest rank first, then leftmost; an entry is stale once its pair no longer stands there.
  struct Cand {
    uint32_t rank;
    int32_t pos;
    int32_t id;
    bool operator<(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Cand> heap;
  heap.clear();
  const auto consider = [&](int32_t pos) {
    const int32_t next = sym[size_t(pos)].next;
    if (next < 0) return;
    const Merge* m = merges_.find(pair_key(sym[size_t(pos)].id, sym[size_t(next)].id));
    if (!m) return;
    heap.push_back({m->rank, pos, m->id});
    std::push_heap(heap.begin(), heap.end());
  };
  for (int32_t p = 0; p + 1 < int32_t(sym.size()); ++p) consider(p);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Cand top = heap.back();
    heap.pop_back();
    Symbol& left = sym[size_t(top.pos)];
    if (left.len == 0 || left.next < 0) continue;
    Symbol& right = sym[size_t(left.next)];
    const Merge* m = merges_.find(pair_key(left.id, right.id));
    if (!m || m->id != top.id) continue;
    left.id = top.id;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (left.next >= 0) sym[size_t(left.next)].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (const Symbol& s : sym)
    if (s.len > 0) out.push_back(s.id);
}

void BpeModel::encode(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (opt_.ignore_merges) {
    const int32_t whole = id(word);
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  const bool cacheable = word.size() < kMaxCachedBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t before = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + long(before), out.end()));
  }
}

}  // namespace loft
