// Rows of head_norm_rope and its backward (Qwen3's per-head q/k norms fused with RoPE): head dims
// from 2 to 256, odd halves (130: a lane's pairs run past 32), more heads than a block has warps,
// the weight in F32 beside BF16 activations, and dx written over dy.
#include "engine/ops/cases/op_cases.h"
#include "engine/ops/ops.h"
#include "engine/ops/rope_freq.h"

namespace loft::cases {
namespace {

constexpr float kEps = 1e-6f;

// t, h, hd, max_pos; then w_f32 (and the backward's mode).
const std::vector<Sizes> kShapes = {{1, 1, 2, 512},  {5, 3, 8, 512},   {33, 4, 64, 512}, {7, 2, 128, 4096},
                                    {9, 40, 128, 4096}, {4, 9, 130, 2048}, {2, 3, 256, 4096}, {3, 2, 16, 2048}};

std::vector<Sizes> with_tails(const std::vector<Sizes>& tails) {
  std::vector<Sizes> v;
  for (const Sizes& s : kShapes)
    for (const Sizes& t : tails) {
      Sizes z = s;
      z.insert(z.end(), t.begin(), t.end());
      v.push_back(z);
    }
  return v;
}

// x, weight, positions, inv_freq, dy, flags (the size's entries from 4 on).
Tensors make_inputs(const Sizes& s, std::mt19937& rng) {
  const std::vector<float> inv = rope_inv_freq(int(s[2]), 1e6, RopeScaling{});
  const std::vector<int32_t> f(s.begin() + 4, s.end());
  return Tensors{random_tensor({s[0], s[1], s[2]}, rng, -2, 2), random_tensor({s[2]}, rng, 0.5f, 1.5f),
                 random_ids({s[0]}, int32_t(s[3]), rng), Tensor::from_vector(inv, {int64_t(inv.size())}),
                 random_tensor({s[0], s[1], s[2]}, rng), Tensor::from_vector(f, {int64_t(f.size())})};
}

Tensor weight_on(const Tensors& in, Device d, DType dt) {
  return on(in[1], d, in[5].ptr<int32_t>()[0] ? DType::F32 : dt);
}

Tensor forward_cpu(const Tensors& in) {
  Tensor y = out_like(in[0].shape(), Device::cpu(), DType::F32);
  ops::head_norm_rope(in[0], in[1], kEps, in[2], in[3], y);
  return y;
}

std::vector<Sizes> q_and_k(const LayerSizes& l, const Sizes& tail) {
  std::vector<Sizes> v{{l.tokens(), l.heads, l.head_dim, l.seq}, {l.tokens(), l.kv_heads, l.head_dim, l.seq}};
  for (Sizes& s : v) s.insert(s.end(), tail.begin(), tail.end());
  return v;
}

OpCase forward_case() {
  OpCase c{"head_norm_rope"};
  c.dims = {"t", "h", "hd", "max_pos", "w_f32"};
  c.sizes = with_tails({{0}, {1}});
  c.make = make_inputs;
  c.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    const Tensor x = on(in[0], d, dt), w = weight_on(in, d, dt), pos = on(in[2], d, dt),
                 inv = on(in[3], d, DType::F32);
    Tensor y = out_like(x.shape(), d, dt), rstd = out_like({x.size(0) * x.size(1)}, d, DType::F32);
    call([&] { ops::head_norm_rope(x, w, kEps, pos, inv, y, &rstd); });
    return Tensors{host_f32(y), host_f32(rstd)};
  };
  c.tol_bf16_of = {2e-2, 1e-5};  // y (rounded twice: the norm, then the rotation); rstd (F32)
  c.layer_sizes = [](const LayerSizes& l) { return q_and_k(l, {0}); };
  c.cost = [](const Sizes& s, double act) { return Cost{2.0 * double(s[0] * s[1] * s[2]) * act, 0}; };
  return c;
}

// mode 0: dx fresh; 1: dx written over dy.
OpCase backward_case() {
  OpCase c{"head_norm_rope_backward"};
  c.dims = {"t", "h", "hd", "max_pos", "w_f32", "mode", "amax"};
  c.sizes = with_amax(with_tails({{0, 0}, {1, 0}, {0, 1}}));
  c.make = make_inputs;
  c.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    const Tensor x = on(in[0], d, dt), w = weight_on(in, d, dt), pos = on(in[2], d, dt),
                 inv = on(in[3], d, DType::F32);
    Tensor y = out_like(x.shape(), d, dt), rstd = out_like({x.size(0) * x.size(1)}, d, DType::F32);
    ops::head_norm_rope(x, w, kEps, pos, inv, y, &rstd);
    Tensor dy = on(in[4], d, dt);
    Tensor dx = in[5].ptr<int32_t>()[1] ? dy : out_like(x.shape(), d, dt);
    Tensor amax = amax_slot(in[5].ptr<int32_t>()[2], d);
    call([&] { ops::head_norm_rope_backward(dy, x, w, rstd, pos, inv, dx, amax_arg(amax)); });
    return Tensors{host_f32(dx), amax_out(amax)};
  };
  c.tol_bf16 = 2e-2;
  c.backward_of = "head_norm_rope";
  c.loss = [](const Tensors& in, Device) { return dot(forward_cpu(in), in[4]); };
  c.grad_of = {0};
  c.layer_sizes = [](const LayerSizes& l) { return with_amax(q_and_k(l, {0, 0})); };
  c.cost = [](const Sizes& s, double act) { return Cost{3.0 * double(s[0] * s[1] * s[2]) * act, 0}; };
  return c;
}

}  // namespace

std::vector<OpCase> head_norm_cases() { return {forward_case(), backward_case()}; }

}  // namespace loft::cases
