// CPU RoPE: forward against a double reference of the HF rotate-half formula, hand-computed
// angles, identities (position 0, inverse∘forward), and the backward (= inverse) against finite
// differences of L = Σ r⊙rope(x) evaluated on the double reference.
#include <cmath>
#include <numbers>

#include "engine/ops/ops.h"
#include "engine/ops/rope_freq.h"
#include "tests/engine/test_ops_cpu_util.h"

namespace loft {
namespace {

// x [tokens, heads, dim] in double. The angle is the fp32 product float(pos)·inv_freq[i], as ops.h
// and transformers define it; only cos/sin and the rotation are taken in double.
std::vector<double> rope_ref(const std::vector<double>& x, const std::vector<int32_t>& pos,
                             const std::vector<float>& inv_freq, int64_t heads) {
  const size_t half = inv_freq.size(), dim = 2 * half;
  std::vector<double> y(x.size());
  for (size_t t = 0; t < pos.size(); ++t)
    for (size_t h = 0; h < size_t(heads); ++h)
      for (size_t i = 0; i < half; ++i) {
        const double theta = double(float(pos[t]) * inv_freq[i]);
        const size_t base = (t * size_t(heads) + h) * dim;
        const double a = x[base + i], b = x[base + i + half];
        y[base + i] = a * std::cos(theta) - b * std::sin(theta);
        y[base + i + half] = b * std::cos(theta) + a * std::sin(theta);
      }
  return y;
}

struct RopeCase {
  int64_t tokens, heads, dim;
  RopeScaling scaling;
};

std::vector<RopeCase> cases() {
  return {{1, 1, 2, {}}, {7, 3, 64, {}}, {5, 2, 128, {.type = "llama3", .factor = 8.0}},
          {3, 1, 6, {}}, {4, 5, 172, {}}};
}

// Random x and positions in [0, 8192) for one case, as host vectors and as op arguments.
struct RopeInputs {
  std::vector<float> freq;
  std::vector<int32_t> pos;
  Tensor x, positions, inv_freq;
};

RopeInputs make_inputs(const RopeCase& c, double theta, std::mt19937& rng) {
  RopeInputs in;
  in.freq = rope_inv_freq(int(c.dim), theta, c.scaling);
  std::uniform_int_distribution<int32_t> dist(0, 8191);
  for (int64_t t = 0; t < c.tokens; ++t) in.pos.push_back(dist(rng));
  in.x = test::random_tensor({c.tokens, c.heads, c.dim}, rng);
  in.positions = Tensor::from_vector(in.pos, {c.tokens});
  in.inv_freq = Tensor::from_vector(in.freq, {c.dim / 2});
  return in;
}

TEST(OpsCpuRope, ForwardMatchesDoubleReference) {
  std::mt19937 rng(31);
  for (const RopeCase& c : cases()) {
    RopeInputs in = make_inputs(c, 500000.0, rng);
    const auto ref = rope_ref(test::to_double(in.x), in.pos, in.freq, c.heads);
    ops::rope(in.x, in.positions, in.inv_freq);
    EXPECT_LT(test::rel_error_ref(in.x, ref), 1e-5) << in.x.str();
  }
}

TEST(OpsCpuRope, PositionZeroIsIdentityAndInverseUndoesForward) {
  std::mt19937 rng(32);
  const auto freq = rope_inv_freq(64, 10000.0, {});
  Tensor f = Tensor::from_vector(freq, {32});
  Tensor x = test::random_tensor({4, 3, 64}, rng), orig = x.clone();
  ops::rope(x, Tensor::from_vector(std::vector<int32_t>(4, 0), {4}), f);
  EXPECT_EQ(test::rel_error(x, orig), 0.0);

  Tensor p = Tensor::from_vector(std::vector<int32_t>{1, 17, 900, 8191}, {4});
  ops::rope(x, p, f);
  EXPECT_GT(test::rel_error(x, orig), 0.1);
  ops::rope(x, p, f, /*inverse=*/true);
  EXPECT_LT(test::rel_error(x, orig), 1e-6);
}

TEST(OpsCpuRope, MatchesHfFormulaAtKnownAngles) {
  // head_dim 6, one token at position 2: inv_freq (π/4, π/6, 0) gives θ = (π/2, π/3, 0).
  // HF: q·cos + rotate_half(q)·sin with rotate_half(q) = (−q[3:], q[:3]).
  const float pi = std::numbers::pi_v<float>;
  Tensor f = Tensor::from_vector(std::vector<float>{pi / 4, pi / 6, 0.0f}, {3});
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {1, 1, 6});
  ops::rope(x, Tensor::from_vector(std::vector<int32_t>{2}, {1}), f);
  const double c3 = 0.5, s3 = std::sqrt(3.0) / 2;
  // θ=π/2: (1,4) → (−4, 1).  θ=π/3: (2,5) → (2c−5s, 5c+2s).  θ=0: (3,6) unchanged.
  const std::vector<double> want = {-4, 2 * c3 - 5 * s3, 3, 1, 5 * c3 + 2 * s3, 6};
  const auto got = x.to_float_vector();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6) << i;
}

TEST(OpsCpuRope, InverseIsBackwardByFiniteDifferences) {
  std::mt19937 rng(33);
  for (const RopeCase& c : cases()) {
    const RopeInputs in = make_inputs(c, 10000.0, rng);
    Tensor r = test::random_tensor(in.x.shape(), rng);  // L = Σ r⊙rope(x): dL/dx = rope⁻¹(r)
    Tensor grad = r.clone();
    ops::rope(grad, in.positions, in.inv_freq, /*inverse=*/true);
    const auto rd = test::to_double(r);
    const auto fd = test::fd_gradient(test::to_double(in.x), [&](const auto& v) {
      return test::dot(rd, rope_ref(v, in.pos, in.freq, c.heads));
    });
    EXPECT_LT(test::rel_error_ref(grad, fd), 1e-5) << in.x.str();
  }
}

}  // namespace
}  // namespace loft
