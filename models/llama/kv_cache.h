// The KV cache of Llama inference (models/llama/decode.h): for every layer one K and one V tensor
// [slots, max_len, kv_heads, head_dim], allocated once, up front, in the model's compute dtype
// (BF16 on CUDA, F32 on the CPU). A slot holds one sequence: the rotated keys and the values of
// its positions 0..length(slot)-1. Lengths live on the host. Nothing is allocated afterwards, and
// a request that needs more slots or positions than the cache has is an Error saying so.
//
// Prefix sharing: copy_prefix(from, to, n) makes slot `to` hold the first n positions of slot
// `from` (a device copy of n·layers·2 rows), so a prompt prefix computed once serves several
// continuations (models/llama/score.h: cache_prefix and loglikelihood with a prefix).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/tensor/tensor.h"
#include "models/llama/config.h"

namespace loft::llama {

class LlamaModel;

class KvCache {
 public:
  // `slots` sequences of up to `max_len` positions each (both >= 1), every layer of `config`.
  KvCache(const LlamaConfig& config, int64_t slots, int64_t max_len, DType dtype, Device device);
  // In `model`'s compute dtype on its device.
  static KvCache for_model(const LlamaModel& model, int64_t slots, int64_t max_len);
  // Bytes such a cache holds: 2 · layers · slots · max_len · kv_heads · head_dim · dtype size
  // (SIZE_MAX when that overflows).
  static size_t bytes_for(const LlamaConfig& config, int64_t slots, int64_t max_len, DType dtype);
  // How many of `want` slots of max_len positions fit in what the model's device has free (driver
  // free + the allocator's cached blocks, 10% kept back), each slot also feeding up to
  // `step_tokens` tokens through one forward step (their activations). At least 1; `want` on the
  // CPU, whose memory is not budgeted here.
  static int64_t slots_that_fit(const LlamaModel& model, int64_t want, int64_t max_len, int64_t step_tokens);
  // Throws UsageError, before anything is allocated, when such a cache exceeds the memory of
  // `device` (the GPU's, or the host's RAM): --slots 1e9 or a 2^24-position context is refused
  // with one line instead of dying of out-of-memory. The constructor calls it.
  static void check_fits(const LlamaConfig& config, int64_t slots, int64_t max_len, DType dtype,
                         Device device);

  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;
  KvCache(const KvCache&) = delete;  // a copy would share the tensors' storage
  KvCache& operator=(const KvCache&) = delete;

  int64_t slots() const { return int64_t(length_.size()); }
  int64_t max_len() const { return max_len_; }
  int layers() const { return int(k_.size()); }
  size_t bytes() const;
  // Positions slot holds.
  int64_t length(int64_t slot) const;
  // Throws an Error naming the slot, its length and the cache's size unless `slot` exists and
  // can take `extra` more positions.
  void check_room(int64_t slot, int64_t extra) const;

  // Keeps the first n <= length(slot) positions (n = 0 empties the slot). No device work.
  void truncate(int64_t slot, int64_t n);
  void clear(int64_t slot) { truncate(slot, 0); }
  void clear_all();
  // Slot `to` becomes the first n <= length(from) positions of slot `from` (to != from).
  void copy_prefix(int64_t from, int64_t to, int64_t n);
  // Records n more positions written into `slot` (decode.cpp, after a step's writes).
  void advance(int64_t slot, int64_t n);

  // Layer l's caches [slots, max_len, kv_heads, head_dim].
  Tensor& k(int layer) { return k_[size_t(layer)]; }
  Tensor& v(int layer) { return v_[size_t(layer)]; }

 private:
  void check_slot(int64_t slot) const;
  int64_t max_len_ = 0;
  std::vector<Tensor> k_, v_;
  std::vector<int64_t> length_;
};

}  // namespace loft::llama
