// Open-addressing hash maps for the BPE hot path (vocabulary and merge lookups), where
// std::unordered_map's node chasing costs several cache misses per lookup. Insert-only; keys are
// strings (short ones stored inline in the slot) or 64-bit integers.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace loft {

inline uint64_t hash_bytes(std::string_view s) {
  // FNV-1a over 8-byte words, then a final mix (wyhash-style), good enough for token strings.
  uint64_t h = 0xcbf29ce484222325ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  h = (h ^ tail) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 32);
}

inline uint64_t hash_u64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

namespace detail {

// Power-of-two slot count keeping the load at most one half.
inline size_t capacity_for(size_t n) {
  size_t c = 16;
  while (c < n * 2) c *= 2;
  return c;
}

// Re-inserts the used slots of `slots` into `capacity` (> current) slots by linear probing.
template <typename Slot, typename HashOf>
void grow(std::vector<Slot>& slots, size_t& mask, size_t capacity, HashOf hash_of) {
  if (capacity <= slots.size()) return;
  std::vector<Slot> old = std::move(slots);
  slots.assign(capacity, Slot{});
  mask = capacity - 1;
  for (const Slot& s : old) {
    if (!s.used) continue;
    for (size_t i = hash_of(s) & mask;; i = (i + 1) & mask)
      if (!slots[i].used) {
        slots[i] = s;
        break;
      }
  }
}

}  // namespace detail

// string -> V. Keys of up to 16 bytes live in the slot itself, longer ones in one arena.
template <typename V>
class FlatStringMap {
 public:
  void reserve(size_t n) { rehash(capacity_for(n)); }
  // Inserts or overwrites.
  void set(std::string_view key, V value) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(capacity_for(size_ + 1));
    const uint64_t h = hash_bytes(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) {
        s.used = true;
        s.hash = h;
        s.len = uint32_t(key.size());
        if (key.size() <= kInline) {
          std::memcpy(s.inl, key.data(), key.size());
        } else {
          s.offset = uint32_t(arena_.size());
          arena_.append(key);
        }
        s.value = value;
        ++size_;
        return;
      }
      if (s.hash == h && key_of(s) == key) {
        s.value = value;
        return;
      }
    }
  }
  const V* find(std::string_view key) const {
    if (slots_.empty()) return nullptr;
    const uint64_t h = hash_bytes(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.hash == h && key_of(s) == key) return &s.value;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr size_t kInline = 16;
  struct Slot {
    uint64_t hash = 0;
    uint32_t len = 0;
    bool used = false;
    V value{};
    union {
      char inl[kInline];
      uint32_t offset;
    };
  };
  std::string_view key_of(const Slot& s) const {
    return s.len <= kInline ? std::string_view(s.inl, s.len) : std::string_view(arena_.data() + s.offset, s.len);
  }
  static size_t capacity_for(size_t n) { return detail::capacity_for(n); }
  void rehash(size_t capacity) {
    detail::grow(slots_, mask_, capacity, [](const Slot& s) { return s.hash; });
  }
  std::vector<Slot> slots_;
  std::string arena_;
  size_t mask_ = 0, size_ = 0;
};

// uint64 -> V.
template <typename V>
class FlatU64Map {
 public:
  void reserve(size_t n) { rehash(capacity_for(n)); }
  void set(uint64_t key, V value) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(capacity_for(size_ + 1));
    for (size_t i = hash_u64(key) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used || s.key == key) {
        size_ += !s.used;
        s = {key, true, value};
        return;
      }
    }
  }
  const V* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = hash_u64(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.key == key) return &s.value;
    }
  }

 private:
  struct Slot {
    uint64_t key = 0;
    bool used = false;
    V value{};
  };
  static size_t capacity_for(size_t n) { return detail::capacity_for(n); }
  void rehash(size_t capacity) {
    detail::grow(slots_, mask_, capacity, [](const Slot& s) { return hash_u64(s.key); });
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
};

}  // namespace loft
