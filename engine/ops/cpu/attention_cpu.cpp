#include "engine/ops/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/ops/cpu/attention_row.h"

namespace loft::ops::cpu {

namespace {
// Index helpers for [T, H, D] tensors.
struct Layout {
  int64_t tokens, hq, hkv, d, seq;
  int64_t group() const { return hq / hkv; }
  size_t qi(int64_t t, int64_t h) const { return size_t((t * hq + h) * d); }
  size_t ki(int64_t t, int64_t h) const { return size_t((t * hkv + h) * d); }
};

Layout layout_of(const Tensor& q, const Tensor& k, int64_t seq) {
  return {q.size(0), q.size(1), k.size(1), q.size(2), seq};
}

// The first key a query at flattened token t may see, checked against the row.
int64_t first_key(const int32_t* doc_start, int64_t t, int64_t seq) {
  const int64_t row0 = t / seq * seq, i = t - row0;
  const int64_t ds = doc_start[t];
  LOFT_CHECK(ds >= 0 && ds <= i, "attention: doc_start[", t, "] = ", ds,
             " is outside [0, ", i, "] (its row-local position)");
  return row0 + ds;
}

}  // namespace

void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
               int64_t seq, float scale, Tensor& out, Tensor& lse) {
  const Layout L = layout_of(q, k, seq);
  const float *Q = q.ptr<float>(), *K = k.ptr<float>(), *V = v.ptr<float>();
  const int32_t* DS = doc_start.ptr<int32_t>();
  float *O = out.ptr<float>(), *LSE = lse.ptr<float>();
  std::vector<float> p(size_t(L.seq));
  for (int64_t t = 0; t < L.tokens; ++t) {
    const int64_t j0 = first_key(DS, t, L.seq), n = t - j0 + 1;
    for (int64_t h = 0; h < L.hq; ++h) {
      const int64_t kh = h / L.group();
      auto key = [&](int64_t j) { return K + L.ki(j0 + j, kh); };
      auto value = [&](int64_t j) { return V + L.ki(j0 + j, kh); };
      LSE[t * L.hq + h] = attend_row(Q + L.qi(t, h), n, L.d, scale, key, value, p.data(), O + L.qi(t, h));
    }
  }
}

void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, const Tensor& lse, const Tensor& doc_start,
                        int64_t seq, float scale, Tensor& dq, Tensor& dk, Tensor& dv) {
  const Layout L = layout_of(q, k, seq);
  const float *Q = q.ptr<float>(), *K = k.ptr<float>(), *V = v.ptr<float>();
  const float *dO = dout.ptr<float>(), *O = out.ptr<float>(), *LSE = lse.ptr<float>();
  const int32_t* DS = doc_start.ptr<int32_t>();
  float *dQ = dq.ptr<float>(), *dK = dk.ptr<float>(), *dV = dv.ptr<float>();
  std::fill(dQ, dQ + dq.numel(), 0.0f);
  std::fill(dK, dK + dk.numel(), 0.0f);
  std::fill(dV, dV + dv.numel(), 0.0f);
  for (int64_t t = 0; t < L.tokens; ++t) {
    const int64_t j0 = first_key(DS, t, L.seq);
    for (int64_t h = 0; h < L.hq; ++h) {
      const int64_t kh = h / L.group();
      const float* qt = Q + L.qi(t, h);
      const float* dot_ = dO + L.qi(t, h);
      // D = dout·out: the softmax Jacobian's diagonal correction, one scalar per query.
      const float D = dot(dot_, O + L.qi(t, h), L.d);
      const float m = LSE[t * L.hq + h];
      float* dqt = dQ + L.qi(t, h);
      for (int64_t j = j0; j <= t; ++j) {
        const float* kj = K + L.ki(j, kh);
        const float* vj = V + L.ki(j, kh);
        const float p = std::exp(scale * dot(qt, kj, L.d) - m);
        const float ds = p * (dot(dot_, vj, L.d) - D) * scale;
        float* dkj = dK + L.ki(j, kh);
        float* dvj = dV + L.ki(j, kh);
        for (int64_t e = 0; e < L.d; ++e) {
          dvj[e] += p * dot_[e];
          dqt[e] += ds * kj[e];
          dkj[e] += ds * qt[e];
        }
      }
    }
  }
}

}  // namespace loft::ops::cpu
