// The ops with amax outputs (engine/ops/op_list.def, "*_amax"), each run on one device and dtype
// twice from the same inputs: with its amaxes (zeroed first) and without. The CPU and GPU amax
// tests check each amax against its output read back (max |value|, exactly) and each output
// against the run without amaxes (the same bytes).
#pragma once
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/ops/ops.h"
#include "engine/ops/rope_freq.h"
#include "tests/common/test_util.h"

namespace loft::test {

struct AmaxRun {
  std::string what;
  std::vector<Tensor> with, without;  // each output of the two runs (on the device, in dtype)
  std::vector<Tensor> amax;           // per output of `with`: its F32 [1] amax
};

// max |v| over a tensor's values as stored, NaN skipped (the quantizer's amax).
inline float stored_amax(const Tensor& t) {
  float m = 0.0f;
  for (float v : t.to_float_vector()) m = std::fmax(m, std::fabs(v));
  return m;
}

// F32 CPU `t` on device d in dtype dt. With `offset`, the tensor is a view one element into a
// larger buffer, so no row is 16-byte aligned (the ops' element-wise paths).
inline Tensor amax_input(const Tensor& t, Device d, DType dt, bool offset) {
  Tensor buf = Tensor::empty({t.numel() + 1}, dt, d);
  Tensor out = buf.slice(offset ? 1 : 0, t.numel()).view(t.shape());
  Tensor src = Tensor::empty(t.shape(), dt, d);
  ops::convert(t.to(d), src);
  out.copy_from(src);
  return out;
}

// Every amax op at [rows, cols] (rope and the head norm at [rows, cols / head_dim, head_dim]).
inline std::vector<AmaxRun> amax_runs(Device d, DType dt, int64_t rows, int64_t cols, int64_t head_dim,
                                      bool offset, uint32_t seed) {
  std::mt19937 rng(seed);
  auto in = [&](Shape s, float lo = -2.0f, float hi = 2.0f) {
    return amax_input(random_tensor(s, rng, lo, hi), d, dt, offset);
  };
  auto like = [&](const Tensor& t) { return amax_input(Tensor::zeros(t.shape(), DType::F32), d, dt, offset); };
  auto zero_amax = [&] { return Tensor::zeros({1}, DType::F32, d); };
  auto clone = [&](const Tensor& t) {
    Tensor c = like(t);
    c.copy_from(t);
    return c;
  };
  std::vector<AmaxRun> runs;
  const float eps = 1e-5f;
  const Tensor x = in({rows, cols}), w = in({cols}, 0.5f, 1.5f), res = in({rows, cols});
  {  // rmsnorm
    AmaxRun r{"rmsnorm", {}, {}, {}};
    Tensor y1 = like(x), y2 = like(x), a = zero_amax();
    ops::rmsnorm(x, w, eps, y1, nullptr, &a);
    ops::rmsnorm(x, w, eps, y2);
    r.with = {y1}, r.without = {y2}, r.amax = {a};
    runs.push_back(r);
  }
  {  // add_rmsnorm: x updated in place, then normed
    AmaxRun r{"add_rmsnorm", {}, {}, {}};
    Tensor x1 = clone(x), x2 = clone(x), y1 = like(x), y2 = like(x), a = zero_amax();
    ops::add_rmsnorm(res, x1, w, eps, y1, nullptr, &a);
    ops::add_rmsnorm(res, x2, w, eps, y2);
    r.with = {y1}, r.without = {y2}, r.amax = {a};
    runs.push_back(r);
  }
  {  // rmsnorm_backward_add, dx aliasing add as the model runs it
    AmaxRun r{"rmsnorm_backward_add", {}, {}, {}};
    Tensor y = like(x), rstd = Tensor::empty({rows}, DType::F32, d);
    ops::rmsnorm(x, w, eps, y, &rstd);
    const Tensor dy = in({rows, cols});
    Tensor dx1 = clone(res), dx2 = clone(res), a = zero_amax();
    ops::rmsnorm_backward_add(dy, x, w, rstd, dx1, dx1, nullptr, &a);
    ops::rmsnorm_backward_add(dy, x, w, rstd, dx2, dx2);
    r.with = {dx1}, r.without = {dx2}, r.amax = {a};
    runs.push_back(r);
  }
  const int64_t heads = cols / head_dim;
  std::vector<int32_t> pos(static_cast<size_t>(rows));
  for (int64_t t = 0; t < rows; ++t) pos[size_t(t)] = int32_t((t * 37) % 4096);
  const Tensor positions = Tensor::from_vector(pos, {rows}).to(d);
  const Tensor inv_freq = Tensor::from_vector(rope_inv_freq(int(head_dim), 500000.0, {}), {head_dim / 2}).to(d);
  for (bool inverse : {false, true}) {
    AmaxRun r{inverse ? "rope inverse" : "rope", {}, {}, {}};
    Tensor q = in({rows, heads, head_dim}), q1 = clone(q), q2 = clone(q), a = zero_amax();
    ops::rope(q1, positions, inv_freq, inverse, &a);
    ops::rope(q2, positions, inv_freq, inverse);
    r.with = {q1}, r.without = {q2}, r.amax = {a};
    runs.push_back(r);
  }
  {  // head_norm_rope_backward, in place as the model runs it
    AmaxRun r{"head_norm_rope_backward", {}, {}, {}};
    const Tensor k = in({rows, heads, head_dim}), hw = in({head_dim}, 0.5f, 1.5f);
    Tensor ky = like(k), rstd = Tensor::empty({rows * heads}, DType::F32, d);
    ops::head_norm_rope(k, hw, eps, positions, inv_freq, ky, &rstd);
    const Tensor dy = in({rows, heads, head_dim});
    Tensor g1 = clone(dy), g2 = clone(dy), a = zero_amax();
    ops::head_norm_rope_backward(g1, k, hw, rstd, positions, inv_freq, g1, &a);
    ops::head_norm_rope_backward(g2, k, hw, rstd, positions, inv_freq, g2);
    r.with = {g1}, r.without = {g2}, r.amax = {a};
    runs.push_back(r);
  }
  const Tensor gate = in({rows, cols}, -6.0f, 6.0f), up = in({rows, cols});
  {  // swiglu
    AmaxRun r{"swiglu", {}, {}, {}};
    Tensor o1 = like(gate), o2 = like(gate), a = zero_amax();
    ops::swiglu(gate, up, o1, &a);
    ops::swiglu(gate, up, o2);
    r.with = {o1}, r.without = {o2}, r.amax = {a};
    runs.push_back(r);
  }
  {  // swiglu_backward in place (dgate over gate, dup over up), as the MLP runs it
    AmaxRun r{"swiglu_backward", {}, {}, {}};
    const Tensor dout = in({rows, cols});
    Tensor g1 = clone(gate), u1 = clone(up), g2 = clone(gate), u2 = clone(up);
    Tensor ag = zero_amax(), au = zero_amax();
    ops::swiglu_backward(dout, g1, u1, g1, u1, &ag, &au);
    ops::swiglu_backward(dout, g2, u2, g2, u2);
    r.with = {g1, u1}, r.without = {g2, u2}, r.amax = {ag, au};
    runs.push_back(r);
  }
  return runs;
}

// The checks both suites make of every run: each amax is max |output| exactly, each output the
// same bytes as without amaxes. `where` names the case in failures.
inline void check_amax_runs(const std::vector<AmaxRun>& runs, const std::string& where) {
  for (const AmaxRun& r : runs)
    for (size_t i = 0; i < r.with.size(); ++i) {
      const float want = stored_amax(r.with[i]);
      EXPECT_GT(want, 0.0f) << where << " " << r.what;
      EXPECT_EQ(r.amax[i].to_float_vector()[0], want) << where << " " << r.what << " output " << i;
      EXPECT_TRUE(same_bytes(r.with[i], r.without[i])) << where << " " << r.what << " output " << i;
    }
}

}  // namespace loft::test
