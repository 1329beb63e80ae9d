// Attention on the CPU, forward and backward, spread over host threads: the forward by blocks of
// queries, the backward by KV heads. Every query row and every KV head's accumulation runs in the
// serial order, so the thread count never changes a bit (AttentionCpu.ThreadsDoNotChangeTheBits).
#include "engine/ops/cpu/attention_cpu.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "engine/core/parallel.h"
#include "engine/ops/cpu/attention_row.h"
#include "engine/ops/ops.h"

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

// Threads for L's work: one below ~4 MFLOP (a thread costs tens of microseconds to start),
// else every hardware thread.
int threads_for(const Layout& L) {
  const double flops = 4.0 * double(L.tokens) * double(std::min(L.seq, L.tokens)) * double(L.hq * L.d);
  return flops < 4e6 ? 1 : 0;
}

constexpr int64_t kQueryBlock = 16;  // queries a forward task takes

}  // namespace

void attention_on_threads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
                          int64_t seq, float scale, Tensor& out, Tensor& lse, int threads) {
  const Layout L = layout_of(q, k, seq);
  const float *Q = q.ptr<float>(), *K = k.ptr<float>(), *V = v.ptr<float>();
  const int32_t* DS = doc_start.ptr<int32_t>();
  float *O = out.ptr<float>(), *LSE = lse.ptr<float>();
  // Checked up front, on this thread: the rows' tasks then cannot fail.
  for (int64_t t = 0; t < L.tokens; ++t) first_key(DS, t, L.seq);
  parallel_for((L.tokens + kQueryBlock - 1) / kQueryBlock, [&](int64_t b) {
    std::vector<float> p(size_t(L.seq));
    for (int64_t t = b * kQueryBlock, end = std::min(L.tokens, t + kQueryBlock); t < end; ++t) {
      const int64_t j0 = first_key(DS, t, L.seq), n = t - j0 + 1;
      for (int64_t h = 0; h < L.hq; ++h) {
        const int64_t kh = h / L.group();
        auto key = [&](int64_t j) { return K + L.ki(j0 + j, kh); };
        auto value = [&](int64_t j) { return V + L.ki(j0 + j, kh); };
        LSE[t * L.hq + h] = attend_row(Q + L.qi(t, h), n, L.d, scale, key, value, p.data(), O + L.qi(t, h));
      }
    }
  }, threads);
}

void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
               int64_t seq, float scale, Tensor& out, Tensor& lse) {
  attention_on_threads(q, k, v, doc_start, seq, scale, out, lse, threads_for(layout_of(q, k, seq)));
}

void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, const Tensor& lse, const Tensor& doc_start,
                        int64_t seq, float scale, Tensor& dq, Tensor& dk, Tensor& dv) {
  attention_backward_on_threads(dout, q, k, v, out, lse, doc_start, seq, scale, dq, dk, dv,
                                threads_for(layout_of(q, k, seq)));
}

void attention_backward_on_threads(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& out, const Tensor& lse, const Tensor& doc_start,
                                   int64_t seq, float scale, Tensor& dq, Tensor& dk, Tensor& dv,
                                   int threads) {
  const Layout L = layout_of(q, k, seq);
  const float *Q = q.ptr<float>(), *K = k.ptr<float>(), *V = v.ptr<float>();
  const float *dO = dout.ptr<float>(), *O = out.ptr<float>(), *LSE = lse.ptr<float>();
  const int32_t* DS = doc_start.ptr<int32_t>();
  float *dQ = dq.ptr<float>(), *dK = dk.ptr<float>(), *dV = dv.ptr<float>();
  for (int64_t t = 0; t < L.tokens; ++t) first_key(DS, t, L.seq);
  // A KV head's task: its dK and dV take the terms of every (query, head of its group) in the
  // serial loop's order, and each dQ row belongs to one task. Each sums into its own buffers,
  // copied out at its end: at small head dims the heads' rows share cache lines, which threads
  // writing them in turn would pass back and forth.
  const int64_t G = L.group(), T = L.tokens, d = L.d;
  // At most 1 GiB of those buffers at once (a long context's are ~100 MB a head).
  const int64_t task_bytes = T * (G + 2) * d * int64_t(sizeof(float));
  const int most = int(std::clamp<int64_t>((int64_t(1) << 30) / std::max<int64_t>(task_bytes, 1), 1, 1 << 16));
  threads = threads == 0 ? std::min<int>(most, int(std::max(1u, std::thread::hardware_concurrency()))) : threads;
  parallel_for(L.hkv, [&](int64_t kh) {
    std::vector<float> dq_g(size_t(T * G * d)), dk_h(size_t(T * d)), dv_h(size_t(T * d));
    for (int64_t t = 0; t < T; ++t) {
      const int64_t j0 = first_key(DS, t, L.seq);
      for (int64_t g = 0; g < G; ++g) {
        const int64_t h = kh * G + g;
        const float* qt = Q + L.qi(t, h);
        const float* dot_ = dO + L.qi(t, h);
        // D = dout·out: the softmax Jacobian's diagonal correction, one scalar per query.
        const float D = dot(dot_, O + L.qi(t, h), d);
        const float m = LSE[t * L.hq + h];
        float* dqt = &dq_g[size_t((t * G + g) * d)];
        for (int64_t j = j0; j <= t; ++j) {
          const float* kj = K + L.ki(j, kh);
          const float* vj = V + L.ki(j, kh);
          const float p = std::exp(scale * dot(qt, kj, d) - m);
          const float ds = p * (dot(dot_, vj, d) - D) * scale;
          float* dkj = &dk_h[size_t(j * d)];
          float* dvj = &dv_h[size_t(j * d)];
          for (int64_t e = 0; e < d; ++e) {
            dvj[e] += p * dot_[e];
            dqt[e] += ds * kj[e];
            dkj[e] += ds * qt[e];
          }
        }
      }
    }
    for (int64_t t = 0; t < T; ++t) {
      std::copy_n(&dq_g[size_t(t * G * d)], G * d, dQ + L.qi(t, kh * G));
      std::copy_n(&dk_h[size_t(t * d)], d, dK + L.ki(t, kh));
      std::copy_n(&dv_h[size_t(t * d)], d, dV + L.ki(t, kh));
    }
  }, threads);
}

}  // namespace loft::ops::cpu
