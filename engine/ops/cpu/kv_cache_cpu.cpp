// KV-cache write and cached attention on the CPU. cached_attention runs each query through the
// same attend_row as attention_cpu.cpp, so a query decoded through the cache sees exactly the
// scores and weights a full forward gives it.
#include "engine/ops/cpu/kv_cache_cpu.h"
#include "engine/ops/ops.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "engine/ops/cpu/attention_row.h"

namespace loft::ops::cpu {

namespace {

struct CacheShape {
  int64_t slots, max_len, hkv, d;
  size_t row(int64_t slot, int64_t pos, int64_t h) const {
    return size_t(((slot * max_len + pos) * hkv + h) * d);
  }
};

CacheShape shape_of(const Tensor& cache) {
  return {cache.size(0), cache.size(1), cache.size(2), cache.size(3)};
}

void check_place(const char* op, const CacheShape& c, int64_t t, int32_t slot, int32_t pos) {
  LOFT_CHECK(slot >= 0 && slot < c.slots && pos >= 0 && pos < c.max_len, op, ": token ", t, " goes to slot ",
             slot, " position ", pos, ", outside the cache's ", c.slots, " slots of ", c.max_len,
             " positions");
}

}  // namespace

void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, const Tensor& pos,
                    Tensor& k_cache, Tensor& v_cache) {
  const CacheShape c = shape_of(k_cache);
  const int32_t *S = slots.ptr<int32_t>(), *P = pos.ptr<int32_t>();
  const int64_t T = k.size(0), row = c.hkv * c.d;
  for (int64_t t = 0; t < T; ++t)
    if (S[t] >= 0) check_place("kv_cache_write", c, t, S[t], P[t]);
  for (int64_t t = 0; t < T; ++t) {
    if (S[t] < 0) continue;
    const size_t at = c.row(S[t], P[t], 0);
    std::memcpy(k_cache.ptr<float>() + at, k.ptr<float>() + t * row, size_t(row) * sizeof(float));
    std::memcpy(v_cache.ptr<float>() + at, v.ptr<float>() + t * row, size_t(row) * sizeof(float));
  }
}

void cached_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      const Tensor& slots, const Tensor& pos, float scale, Tensor& out,
                      const Tensor*, int64_t window) {  // tiles: a CUDA layout hint
  const CacheShape c = shape_of(k_cache);
  const int64_t T = q.size(0), hq = q.size(1), d = c.d, group = hq / c.hkv;
  const int32_t *S = slots.ptr<int32_t>(), *P = pos.ptr<int32_t>();
  for (int64_t t = 0; t < T; ++t) check_place("cached_attention", c, t, S[t], P[t]);
  const float *Q = q.ptr<float>(), *K = k_cache.ptr<float>(), *V = v_cache.ptr<float>();
  float* O = out.ptr<float>();
  std::vector<float> p(size_t(c.max_len));
  for (int64_t t = 0; t < T; ++t) {
    // Keys first..pos[t], in the order attention_cpu.cpp sums a windowed doc_start's.
    const int64_t first = window > 0 ? std::max<int64_t>(0, int64_t(P[t]) - window + 1) : 0;
    const int64_t n = int64_t(P[t]) + 1 - first;
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t kh = h / group;
      auto key = [&](int64_t j) { return K + c.row(S[t], first + j, kh); };
      auto value = [&](int64_t j) { return V + c.row(S[t], first + j, kh); };
      attend_row(Q + (t * hq + h) * d, n, d, scale, key, value, p.data(), O + (t * hq + h) * d);
    }
  }
}

int32_t argmax(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best] || (std::isnan(row[best]) && !std::isnan(row[i]))) best = i;
  return int32_t(best);
}

void argmax_rows(const Tensor& x, Tensor& out) {
  const int64_t n = x.size(1);
  for (int64_t r = 0; r < x.size(0); ++r) out.ptr<int32_t>()[r] = argmax(x.ptr<float>() + r * n, n);
}

}  // namespace loft::ops::cpu
