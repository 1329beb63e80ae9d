// The CPU attention reference (ops::cpu) against a naive double-precision implementation with an
// explicit mask, its backward against central finite differences of that implementation, and the
// document-packing property.
#include <cmath>
#include <cstring>
#include <functional>

#include "engine/ops/cpu/attention_cpu.h"
#include "engine/ops/ops.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

struct Dims {
  int64_t rows, seq, hq, hkv, d;
  int64_t tokens() const { return rows * seq; }
};

std::string dims_str(const Dims& n, int64_t max_doc_len) {
  return cat("rows=", n.rows, " seq=", n.seq, " hq=", n.hq, " hkv=", n.hkv, " d=", n.d,
             " max_doc_len=", max_doc_len);
}

// doc_start for the test: max_doc_len 0 means one document per row (all zeros).
Tensor make_doc_start(const Dims& n, int64_t max_doc_len, std::mt19937& rng) {
  if (max_doc_len == 0) return Tensor::zeros({n.tokens()}, DType::I32);
  return test::random_doc_start(n.rows, n.seq, max_doc_len, rng);
}

// mask[t·seq + j]: query token t sees key j of its row. Stated through document membership
// (same doc_start, not later than the query) rather than ops.h's interval, so it checks it.
std::vector<char> explicit_mask(const Tensor& doc_start, const Dims& n) {
  const std::vector<int64_t> ds = doc_start.to_int_vector();
  std::vector<char> mask(size_t(n.tokens() * n.seq));
  for (int64_t t = 0; t < n.tokens(); ++t) {
    const int64_t row0 = t / n.seq * n.seq, i = t - row0;
    for (int64_t j = 0; j < n.seq; ++j)
      mask[size_t(t * n.seq + j)] = j <= i && ds[size_t(row0 + j)] == ds[size_t(t)];
  }
  return mask;
}

std::vector<double> to_double(const Tensor& t) {
  const std::vector<float> f = t.to_float_vector();
  return {f.begin(), f.end()};
}

std::vector<float> to_float(const std::vector<double>& d) { return {d.begin(), d.end()}; }

struct Reference {
  std::vector<double> out, lse;
};

Reference naive_attention(const std::vector<double>& q, const std::vector<double>& k,
                          const std::vector<double>& v, const std::vector<char>& mask,
                          const Dims& n, double scale) {
  Reference r{std::vector<double>(q.size(), 0.0), std::vector<double>(size_t(n.tokens() * n.hq))};
  std::vector<double> s(size_t(n.seq));
  for (int64_t t = 0; t < n.tokens(); ++t) {
    const int64_t row0 = t / n.seq * n.seq;
    for (int64_t h = 0; h < n.hq; ++h) {
      const int64_t kh = h / (n.hq / n.hkv);
      const double* qt = &q[size_t((t * n.hq + h) * n.d)];
      double m = -INFINITY;
      for (int64_t j = 0; j < n.seq; ++j) {
        if (!mask[size_t(t * n.seq + j)]) continue;
        const double* kj = &k[size_t(((row0 + j) * n.hkv + kh) * n.d)];
        double dot = 0;
        for (int64_t e = 0; e < n.d; ++e) dot += qt[e] * kj[e];
        s[size_t(j)] = scale * dot;
        m = std::max(m, s[size_t(j)]);
      }
      double l = 0;
      for (int64_t j = 0; j < n.seq; ++j)
        if (mask[size_t(t * n.seq + j)]) l += std::exp(s[size_t(j)] - m);
      const double lse = m + std::log(l);
      r.lse[size_t(t * n.hq + h)] = lse;
      double* o = &r.out[size_t((t * n.hq + h) * n.d)];
      for (int64_t j = 0; j < n.seq; ++j) {
        if (!mask[size_t(t * n.seq + j)]) continue;
        const double p = std::exp(s[size_t(j)] - lse);
        const double* vj = &v[size_t(((row0 + j) * n.hkv + kh) * n.d)];
        for (int64_t e = 0; e < n.d; ++e) o[e] += p * vj[e];
      }
    }
  }
  return r;
}

struct Inputs {
  Tensor q, k, v, doc_start;
  float scale;
};

Inputs random_inputs(const Dims& n, int64_t max_doc_len, std::mt19937& rng) {
  return {test::random_tensor({n.tokens(), n.hq, n.d}, rng),
          test::random_tensor({n.tokens(), n.hkv, n.d}, rng),
          test::random_tensor({n.tokens(), n.hkv, n.d}, rng), make_doc_start(n, max_doc_len, rng),
          float(1.0 / std::sqrt(double(n.d)))};
}

void run_forward(const Inputs& in, int64_t seq, Tensor& out, Tensor& lse) {
  out = Tensor::empty(in.q.shape(), DType::F32);
  lse = Tensor::empty({in.q.size(0), in.q.size(1)}, DType::F32);
  ops::cpu::attention(in.q, in.k, in.v, in.doc_start, seq, in.scale, out, lse);
}

TEST(AttentionCpu, ForwardMatchesNaiveReference) {
  std::mt19937 rng(7);
  const int64_t heads[][2] = {{8, 4}, {4, 4}, {6, 1}};
  for (const auto& hh : heads)
    for (int64_t d : {8, 64, 24})
      for (int64_t seq : {1, 7, 33})
        for (int64_t max_doc_len : {int64_t(0), 1 + seq / 4}) {
          const Dims n{3, seq, hh[0], hh[1], d};
          SCOPED_TRACE(dims_str(n, max_doc_len));
          const Inputs in = random_inputs(n, max_doc_len, rng);
          Tensor out, lse;
          run_forward(in, seq, out, lse);
          const Reference ref = naive_attention(to_double(in.q), to_double(in.k), to_double(in.v),
                                                explicit_mask(in.doc_start, n), n, in.scale);
          EXPECT_LT(test::rel_error(out.to_float_vector(), to_float(ref.out)), 1e-5);
          EXPECT_LT(test::rel_error(lse.to_float_vector(), to_float(ref.lse)), 1e-5);
        }
}

// Central differences of f at every entry of x (x is restored afterwards).
std::vector<float> numeric_grad(std::vector<double>& x, const std::function<double()>& f) {
  constexpr double h = 1e-5;
  std::vector<float> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double up = f();
    x[i] = x0 - h;
    const double down = f();
    x[i] = x0;
    g[i] = float((up - down) / (2 * h));
  }
  return g;
}

TEST(AttentionCpu, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(11);
  const std::pair<Dims, int64_t> cases[] = {
      {{2, 7, 4, 2, 8}, 3},    // GQA groups of 2, packed documents
      {{1, 12, 6, 1, 24}, 5},  // one kv head for six query heads
      {{2, 9, 3, 3, 5}, 0},    // plain multi-head, one document per row, odd head_dim
      {{3, 1, 8, 4, 8}, 0},    // single-token rows
      {{1, 16, 2, 1, 8}, 1},   // every token its own document
  };
  for (const auto& [n, max_doc_len] : cases) {
    SCOPED_TRACE(dims_str(n, max_doc_len));
    const Inputs in = random_inputs(n, max_doc_len, rng);
    const Tensor dout = test::random_tensor(in.q.shape(), rng);
    Tensor out, lse;
    run_forward(in, n.seq, out, lse);
    Tensor dq = Tensor::empty(in.q.shape(), DType::F32);
    Tensor dk = Tensor::empty(in.k.shape(), DType::F32);
    Tensor dv = Tensor::empty(in.v.shape(), DType::F32);
    ops::cpu::attention_backward(dout, in.q, in.k, in.v, out, lse, in.doc_start, n.seq, in.scale,
                                 dq, dk, dv);

    std::vector<double> q = to_double(in.q), k = to_double(in.k), v = to_double(in.v);
    const std::vector<double> r = to_double(dout);
    const std::vector<char> mask = explicit_mask(in.doc_start, n);
    // L = Σ r ⊙ out, so dL/dout = r.
    auto loss = [&] {
      const Reference ref = naive_attention(q, k, v, mask, n, in.scale);
      double l = 0;
      for (size_t i = 0; i < r.size(); ++i) l += r[i] * ref.out[i];
      return l;
    };
    EXPECT_LT(test::rel_error(dq.to_float_vector(), numeric_grad(q, loss)), 1e-5);
    EXPECT_LT(test::rel_error(dk.to_float_vector(), numeric_grad(k, loss)), 1e-5);
    EXPECT_LT(test::rel_error(dv.to_float_vector(), numeric_grad(v, loss)), 1e-5);
  }
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// The forward's query blocks and the backward's KV heads spread over threads give the serial
// loop's bits: every row, and every KV head's sums, keep their order.
TEST(AttentionCpu, ThreadsDoNotChangeTheBits) {
  std::mt19937 rng(9);
  const Dims shapes[] = {{2, 33, 8, 4, 24}, {1, 70, 6, 1, 8}, {3, 17, 4, 4, 16}};
  for (const Dims& n : shapes)
    for (int64_t max_doc_len : {int64_t(0), int64_t(9)}) {
      SCOPED_TRACE(dims_str(n, max_doc_len));
      const Inputs in = random_inputs(n, max_doc_len, rng);
      const Tensor dout = test::random_tensor(in.q.shape(), rng);
      Tensor out[2], lse[2], dq[2], dk[2], dv[2];
      const int threads[2] = {1, 3};
      for (int i = 0; i < 2; ++i) {
        out[i] = Tensor::empty(in.q.shape(), DType::F32);
        lse[i] = Tensor::empty({in.q.size(0), in.q.size(1)}, DType::F32);
        ops::cpu::attention_on_threads(in.q, in.k, in.v, in.doc_start, n.seq, in.scale, out[i], lse[i], threads[i]);
        dq[i] = Tensor::empty(in.q.shape(), DType::F32);
        dk[i] = Tensor::empty(in.k.shape(), DType::F32);
        dv[i] = Tensor::empty(in.v.shape(), DType::F32);
        ops::cpu::attention_backward_on_threads(dout, in.q, in.k, in.v, out[i], lse[i], in.doc_start, n.seq,
                                                in.scale, dq[i], dk[i], dv[i], threads[i]);
      }
      EXPECT_TRUE(same_bits(out[0], out[1]));
      EXPECT_TRUE(same_bits(lse[0], lse[1]));
      EXPECT_TRUE(same_bits(dq[0], dq[1]));
      EXPECT_TRUE(same_bits(dk[0], dk[1]));
      EXPECT_TRUE(same_bits(dv[0], dv[1]));
    }
}

TEST(AttentionCpu, PackedRowEqualsEachDocumentAlone) {
  std::mt19937 rng(5);
  const Dims n{2, 33, 8, 4, 24};
  const Inputs in = random_inputs(n, 10, rng);
  Tensor out, lse;
  run_forward(in, n.seq, out, lse);
  const std::vector<int64_t> ds = in.doc_start.to_int_vector();
  int documents = 0;
  for (int64_t t0 = 0; t0 < n.tokens();) {
    int64_t len = 1;  // tokens until the next document (or row) starts
    while (t0 + len < n.tokens() && (t0 + len) % n.seq != 0 &&
           ds[size_t(t0 + len)] == ds[size_t(t0)])
      ++len;
    SCOPED_TRACE(cat("document at token ", t0, ", ", len, " tokens"));
    const Inputs alone{in.q.slice(t0, len), in.k.slice(t0, len), in.v.slice(t0, len),
                       Tensor::zeros({len}, DType::I32), in.scale};
    Tensor out1, lse1;
    run_forward(alone, len, out1, lse1);
    EXPECT_LT(test::rel_error(out1, out.slice(t0, len)), 1e-6);
    EXPECT_LT(test::rel_error(lse1, lse.slice(t0, len)), 1e-6);
    t0 += len;
    ++documents;
  }
  EXPECT_GT(documents, 2 * 3);  // the row really held several documents
}

TEST(AttentionCpu, DocStartOutsideRowIsAnError) {
  std::mt19937 rng(3);
  const Dims n{2, 6, 2, 1, 8};
  const Inputs good = random_inputs(n, 0, rng);
  // Token 8 is row-local position 2 of row 1: 3 would be a future key, -1 the previous row.
  for (int32_t bad : {3, -1}) {
    SCOPED_TRACE(cat("doc_start[8] = ", bad));
    std::vector<int32_t> ds(size_t(n.tokens()), 0);
    ds[8] = bad;
    Inputs in = good;
    in.doc_start = Tensor::from_vector(ds, {n.tokens()});
    Tensor out, lse;
    try {
      run_forward(in, n.seq, out, lse);
      ADD_FAILURE() << "attention accepted a bad doc_start";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("doc_start[8]"), std::string::npos) << e.what();
    }
    Tensor dq = Tensor::empty(in.q.shape(), DType::F32),
           dk = Tensor::empty(in.k.shape(), DType::F32),
           dv = Tensor::empty(in.v.shape(), DType::F32);
    EXPECT_THROW(ops::cpu::attention_backward(in.q, in.q, in.k, in.v, in.q, lse, in.doc_start,
                                              n.seq, in.scale, dq, dk, dv),
                 Error);
  }
}

}  // namespace
}  // namespace loft
