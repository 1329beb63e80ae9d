// One query's softmax attention on the CPU, shared by the training forward (attention_cpu.cpp)
// and the cached decode attention (kv_cache_cpu.cpp), so a query decoded through the KV cache sees
// exactly the arithmetic a full forward gives it: double dot products rounded to float, float
// exponentials summed in double, float weights.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace loft::ops::cpu {

// In four running sums (elements i ≡ 0, 1, 2, 3 mod 4), added pairwise at the end: the compiler
// vectorises them, where one running sum's order kept it scalar (2.3x faster at head dim 64).
inline float dot(const float* a, const float* b, int64_t n) {
  double s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) s[k] += double(a[i + k]) * b[i + k];
  for (; i < n; ++i) s[0] += double(a[i]) * b[i];
  return float((s[0] + s[1]) + (s[2] + s[3]));
}

// o[0..d) = Σ_j softmax_j(scale · q·key(j)) · value(j) over j < n (n >= 1); `p` is scratch of n
// floats. Returns the log-sum-exp of the scores.
template <typename KeyRow, typename ValueRow>
float attend_row(const float* q, int64_t n, int64_t d, float scale, KeyRow key, ValueRow value,
                 float* p, float* o) {
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    p[j] = scale * dot(q, key(j), d);
    m = std::max(m, p[j]);
  }
  double l = 0;
  for (int64_t j = 0; j < n; ++j) l += (p[j] = std::exp(p[j] - m));
  std::fill(o, o + d, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const float w = float(p[j] / l);
    const float* vj = value(j);
    for (int64_t e = 0; e < d; ++e) o[e] += w * vj[e];
  }
  return m + float(std::log(l));
}

}  // namespace loft::ops::cpu
