// The BPE model of a tokenizer.json (tokenizers' models::bpe): a pre-token's characters become
// vocabulary ids, then the adjacent pair of lowest merge rank is merged (leftmost first) until no
// pair has a rank. Options as tokenizers has them: ignore_merges (a pre-token that is itself in the
// vocabulary is emitted whole, as Llama 3 sets), byte_fallback (a character not in the vocabulary
// becomes its <0xXX> byte tokens), unk_token with fuse_unk, continuing_subword_prefix and
// end_of_word_suffix. Encoded pre-tokens are cached (the cache is shared by threads, under a lock).
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/flat_map.h"

namespace loft {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

}  // namespace loft

#if defined(__GLIBCXX__)
// libstdc++ stores each node's hash only for hashers it deems slow; a custom hasher counts as fast,
// so every bucket walk would rehash the keys it passes (measured: most of a cache lookup).
template <>
struct std::__is_fast_hash<loft::StringHash> : std::false_type {};
#endif

namespace loft {

struct BpeOptions {
  std::optional<std::string> unk_token;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  std::string continuing_subword_prefix, end_of_word_suffix;
};

class BpeModel {
 public:
  // Throws loft::Error naming `file` when a merge names a token (or makes one) that is not in
  // the vocabulary, or the unk_token is not in it.
  BpeModel(std::vector<std::pair<std::string, int32_t>> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
           const std::string& file);

  // Appends the ids of one pre-token (non-empty, valid UTF-8).
  void encode(std::string_view word, std::vector<int32_t>& out) const;

  int32_t id(std::string_view token) const;           // -1 when not in the vocabulary
  // True when the vocabulary holds at least one byte token "<0xXX>" (what byte_fallback uses).
  bool has_byte_tokens() const {
    for (int32_t b : byte_ids_)
      if (b >= 0) return true;
    return false;
  }
  const std::string* token(int32_t id) const;         // nullptr when no token has this id
  int32_t end_id() const { return int32_t(by_id_.size()); }  // 1 + the largest id
  std::optional<int32_t> unk_id() const { return unk_id_; }
  // The merges as the file lists them (rank order): the ids of the two tokens merged.
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merge_list_; }

 private:
  struct Merge {
    uint32_t rank;
    int32_t id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  // merge_word: the initial symbols (ids and byte lengths), then every merge.
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  int32_t char_id(std::string_view ch, bool first, bool last) const;

  FlatStringMap<int32_t> vocab_;
  std::vector<std::string> by_id_;
  std::vector<bool> has_id_;
  FlatU64Map<Merge> merges_;
  std::vector<std::pair<int32_t, int32_t>> merge_list_;
  std::vector<int32_t> small_char_;  // by code point < 0x800: the id of that single character
  int32_t byte_ids_[256];            // "<0xXX>" ids, or -1
  BpeOptions opt_;
  std::optional<int32_t> unk_id_;

  static constexpr size_t kCacheCapacity = 1 << 16, kMaxCachedBytes = 256;
  mutable std::mutex cache_mutex_;
  mutable StringMap<std::vector<int32_t>> cache_;
};

}  // namespace loft
