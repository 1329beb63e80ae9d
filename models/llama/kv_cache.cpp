#include "models/llama/kv_cache.h"

#include <algorithm>

#include "engine/device/device_info.h"
#include "engine/device/memory.h"
#include "models/llama/model.h"

#include <cstdint>
#include <string>

#include "engine/core/error.h"
#include "engine/device/device_info.h"

namespace loft::llama {

KvCache::KvCache(const LlamaConfig& config, int64_t slots, int64_t max_len, DType dtype,
                 Device device)
    : max_len_(max_len) {
  LOFT_CHECK(slots >= 1 && max_len >= 1, "KvCache: need at least one slot and one position, got ",
             slots, " slots of ", max_len);
  check_fits(config, slots, max_len, dtype, device);
  length_.assign(size_t(slots), 0);
  const Shape shape{slots, max_len, config.num_kv_heads, config.head_dim};
  for (int64_t l = 0; l < config.num_layers; ++l) {
    // Zeroed once so that no uninitialised (possibly NaN) bits are ever read, even by a kernel
    // that masks them out.
    k_.push_back(Tensor::zeros(shape, dtype, device));
    v_.push_back(Tensor::zeros(shape, dtype, device));
  }
}

KvCache KvCache::for_model(const LlamaModel& model, int64_t slots, int64_t max_len) {
  return KvCache(model.config(), slots, max_len, model.compute_dtype(), model.device());
}

size_t KvCache::bytes_for(const LlamaConfig& c, int64_t slots, int64_t max_len, DType dtype) {
  uint64_t n = 2 * uint64_t(c.num_layers);
  for (const uint64_t f : {uint64_t(slots), uint64_t(max_len), uint64_t(c.kv_dim()), uint64_t(dtype_size(dtype))})
    if (__builtin_mul_overflow(n, f, &n)) return SIZE_MAX;
  return size_t(n);
}

void KvCache::check_fits(const LlamaConfig& c, int64_t slots, int64_t max_len, DType dtype,
                         Device device) {
  const size_t need = bytes_for(c, slots, max_len, dtype);
  const int64_t have = device_memory_bytes(device);
  if (have <= 0 || need <= size_t(have)) return;
  const auto gib = [](double b) { return b / double(int64_t(1) << 30); };
  throw UsageError(cat("the KV cache for ", slots, " slots x ", max_len, " positions needs ",
                       need == SIZE_MAX ? std::string("more than 2^64 bytes") : cat(gib(double(need)), " GiB"),
                       ", more than the ", gib(double(have)), " GiB of ", device.str(),
                       "; lower --slots or the tokens to generate"));
}

int64_t KvCache::slots_that_fit(const LlamaModel& model, int64_t want, int64_t max_len, int64_t step_tokens) {
  const Device dev = model.device();
  if (dev.is_cpu() || want <= 1) return std::max<int64_t>(want, 1);
  const LlamaConfig& c = model.config();
  const MemoryStats m = memory_stats(dev);
  const double free = double(device_info(dev).free_bytes) + double(m.reserved - m.allocated);
  // A forward step without saved activations holds, per token, a few hidden-size vectors (the
  // residual, its norm, attention's q/k/v/out) and the MLP's three intermediate-size ones.
  const double per_token = double(dtype_size(model.compute_dtype())) *
                           double(6 * c.hidden_size + 3 * c.intermediate_size + 2 * c.kv_dim());
  const double per_slot = double(bytes_for(c, 1, max_len, model.compute_dtype())) + per_token * double(step_tokens);
  const double logits = double(int64_t(1) << 28);  // the scorer's row budget of F32 logits, with room
  const int64_t fit = int64_t((0.9 * free - logits) / per_slot);
  return std::clamp<int64_t>(fit, 1, want);
}

size_t KvCache::bytes() const {
  size_t n = 0;
  for (size_t l = 0; l < k_.size(); ++l) n += k_[l].nbytes() + v_[l].nbytes();
  return n;
}

void KvCache::check_slot(int64_t slot) const {
  LOFT_CHECK(slot >= 0 && slot < slots(), "KV cache: slot ", slot, " does not exist (the cache has ",
             slots(), " slots)");
}

int64_t KvCache::length(int64_t slot) const {
  check_slot(slot);
  return length_[size_t(slot)];
}

void KvCache::check_room(int64_t slot, int64_t extra) const {
  check_slot(slot);
  const int64_t have = length_[size_t(slot)];
  if (extra < 0 || have + extra > max_len_)
    throw Error(cat("KV cache full: slot ", slot, " holds ", have, " positions and needs ", extra,
                    " more, but the cache was sized for ", max_len_,
                    " positions per sequence (make it larger or the request shorter)"));
}

void KvCache::truncate(int64_t slot, int64_t n) {
  check_slot(slot);
  LOFT_CHECK(n >= 0 && n <= length_[size_t(slot)], "KV cache: cannot truncate slot ", slot,
             " of length ", length_[size_t(slot)], " to ", n);
  length_[size_t(slot)] = n;
}

void KvCache::clear_all() { std::fill(length_.begin(), length_.end(), 0); }

void KvCache::copy_prefix(int64_t from, int64_t to, int64_t n) {
  check_slot(from);
  check_slot(to);
  LOFT_CHECK(from != to && n >= 0 && n <= length_[size_t(from)], "KV cache: cannot copy ", n,
             " positions of slot ", from, " (length ", length_[size_t(from)], ") into slot ", to);
  for (std::vector<Tensor>* kv : {&k_, &v_})
    for (Tensor& t : *kv) {
      const Tensor rows = t.view({slots() * max_len_, t.size(2), t.size(3)});
      if (n > 0) rows.slice(to * max_len_, n).copy_from(rows.slice(from * max_len_, n));
    }
  length_[size_t(to)] = n;
}

void KvCache::advance(int64_t slot, int64_t n) {
  check_room(slot, n);
  length_[size_t(slot)] += n;
}

}  // namespace loft::llama
