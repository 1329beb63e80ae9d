// The value under `key` in `map`, made by `make()` and stored there on first use: the caches of
// a group's shared work (engine/peft/shared_input.h, shared_backward.h) and of cuBLASLt plans.
#pragma once

namespace loft {

template <class Map, class Key, class Make>
auto& find_or_make(Map& map, const Key& key, Make&& make) {
  auto it = map.find(key);
  if (it == map.end()) it = map.emplace(key, make()).first;
  return it->second;
}

}  // namespace loft
