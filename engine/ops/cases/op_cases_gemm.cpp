// The GEMM's row: every transpose pair, four (alpha, beta) pairs (beta 0 over a NaN-filled C),
// odd shapes, unaligned views, a shape repeated with new data (cuBLASLt's plan cache), and C in
// the inputs' dtype and in F32 (BF16×BF16→BF16 and →F32).
#include <limits>

#include "engine/ops/cases/op_cases.h"
#include "engine/ops/ops.h"

namespace loft::cases {
namespace {

// The (alpha, beta) pairs a size's `ab` picks; 0 fills C with NaN (beta 0 must not read it).
constexpr std::pair<float, float> kAlphaBeta[] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-2.0f, 0.25f}, {1.0f, 0.5f}};

// A, B, C (each `off` rows into its buffer), then ta, tb, ab, off as I32 [4].
Tensors gemm_inputs(const Sizes& s, std::mt19937& rng) {
  const int64_t m = s[0], k = s[1], n = s[2], off = s[6];
  Tensor c = random_tensor({m + off, n}, rng);
  if (s[5] == 0)
    for (int64_t i = 0; i < c.numel(); ++i) c.ptr<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  return Tensors{random_tensor(s[3] ? Shape{k + off, m} : Shape{m + off, k}, rng),
                 random_tensor(s[4] ? Shape{n + off, k} : Shape{k + off, n}, rng), c,
                 Tensor::from_vector(std::vector<int32_t>{int32_t(s[3]), int32_t(s[4]), int32_t(s[5]), int32_t(s[6])}, {4})};
}

// C in the inputs' dtype, then C in F32; each returned as its whole buffer (rows before the
// view included: no backend may touch them).
Tensors gemm_run(const Tensors& in, Device d, DType dt, const Call& call) {
  const int32_t* f = in[3].ptr<int32_t>();
  const int64_t off = f[3];
  auto view = [&](const Tensor& buf) { return buf.slice(off, buf.size(0) - off); };
  const Tensor a = view(on(in[0], d, dt)), b = view(on(in[1], d, dt));
  const auto [alpha, beta] = kAlphaBeta[f[2]];
  const ops::GemmOptions opt{f[0] != 0, f[1] != 0, alpha, beta};
  Tensors out;
  for (DType c_dt : {dt, DType::F32}) {
    const Tensor buf = on(in[2], d, c_dt);
    Tensor c = view(buf);
    call([&] { ops::gemm(a, b, c, opt); });
    out.push_back(host_f32(buf));
  }
  return out;
}

std::vector<Sizes> gemm_sizes() {
  std::vector<Sizes> v;
  const Sizes mkn[] = {{1, 1, 1},      {7, 5, 3},       {1, 7, 172}, {173, 33, 65},
                       {64, 256, 128}, {172, 172, 172}, {3, 300, 1}, {3, 5, 7}, {130, 70, 9}, {1, 257, 33}};
  for (const Sizes& s : mkn)
    for (int64_t ta : {0, 1})
      for (int64_t tb : {0, 1})
        for (int64_t ab : {0, 1, 2}) v.push_back({s[0], s[1], s[2], ta, tb, ab, 0});
  for (int i = 0; i < 3; ++i) v.push_back({37, 172, 88, 0, 1, 1, 0});  // one shape, new data each time
  v.push_back({7, 33, 7, 0, 0, 3, 1});  // views cuBLASLt's 256-byte alignment does not hold for
  v.push_back({64, 128, 96, 1, 1, 3, 1});
  return v;
}

// An empty inner dimension: C = beta·C exactly, and 0 (not NaN) for beta 0.
Exact empty_inner(int ab) {
  std::mt19937 rng(5);
  const Tensors in = gemm_inputs({4, 0, 6, 0, 0, ab, 0}, rng);
  std::vector<float> c = in[2].to_float_vector();
  for (float& x : c) x = ab == 0 ? 0.0f : x * kAlphaBeta[ab].second;
  const Tensor want = Tensor::from_vector(c, {4, 6});
  return {DType::F32, in, {want, want}};
}

}  // namespace

std::vector<OpCase> gemm_cases() {
  OpCase c{"gemm"};
  c.dims = {"m", "k", "n", "ta", "tb", "ab", "off"};
  c.sizes = gemm_sizes();
  c.make = gemm_inputs;
  c.run = gemm_run;
  c.tol_bf16_of = {1e-2, 1e-4};  // C in BF16; C in F32 (exact bf16 products, fp32 sums)
  c.exact = {empty_inner(3), empty_inner(0)};
  // A linear layer's products, Y = X·Wᵀ with beta 0: q/o [d, d], gate/up [f, d], down [d, f];
  // then as a bf16 LoRA step issues them (ab=1: beta 1, onto LoRA's term): Y = X·Wᵀ for q/o,
  // k/v [kv, d], gate/up, down, and each backward dX = dY·W (tb=0).
  c.layer_sizes = [](const LayerSizes& l) {
    const int64_t t = l.tokens(), d = l.hidden, f = l.intermediate, kv = l.kv_heads * l.head_dim;
    std::vector<Sizes> v{{t, d, d, 0, 1, 0, 0}, {t, d, f, 0, 1, 0, 0}, {t, f, d, 0, 1, 0, 0}};
    for (const auto& [in, out] : {std::pair{d, d}, {d, kv}, {d, f}, {f, d}}) {
      if (out == kv && kv == d) continue;  // no GQA: k/v are q's shape
      v.push_back({t, in, out, 0, 1, 1, 0});
      v.push_back({t, out, in, 0, 0, 1, 0});
    }
    return v;
  };
  c.cost = [](const Sizes& s, double) { return Cost{0, 2.0 * double(s[0]) * double(s[1]) * double(s[2])}; };
  return {c};
}

}  // namespace loft::cases
