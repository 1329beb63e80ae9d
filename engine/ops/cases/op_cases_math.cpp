// Rows of RoPE, SwiGLU, embedding and cross-entropy.
#include "engine/ops/cases/op_cases.h"
#include "engine/ops/ops.h"
#include "engine/ops/rope_freq.h"

namespace loft::cases {
namespace {

const Device kCpu = Device::cpu();

Tensor rope_cpu(const Tensor& x, const Tensor& pos, const Tensor& inv_freq) {
  Tensor y = x.clone();
  ops::rope(y, pos, inv_freq);
  return y;
}

// x rotated, then dy rotated back: the inverse rotation is the backward of the forward one.
OpCase rope_case() {
  OpCase c{"rope"};
  c.dims = {"t", "h", "hd", "max_pos", "amax"};
  c.sizes = with_amax({{1, 1, 2, 512},   {5, 3, 8, 512},     {33, 4, 64, 512},  {7, 2, 128, 512},
                       {1, 1, 8, 4096},  {7, 3, 8, 4096},    {65, 8, 128, 4096}, {9, 1, 128, 4096},
                       {3, 5, 2, 4096},  {3, 2, 16, 2048}});
  c.make = [](const Sizes& s, std::mt19937& rng) {  // x, positions, inv_freq, dy, amax flag
    const std::vector<float> inv = rope_inv_freq(int(s[2]), 10000.0, RopeScaling{});
    return Tensors{random_tensor({s[0], s[1], s[2]}, rng), random_ids({s[0]}, int32_t(s[3]), rng),
                   Tensor::from_vector(inv, {int64_t(inv.size())}), random_tensor({s[0], s[1], s[2]}, rng),
                   Tensor::from_vector(std::vector<int32_t>{int32_t(s[4])}, {1})};
  };
  c.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    Tensor x = on(in[0], d, dt), dx = on(in[3], d, dt);
    const Tensor pos = on(in[1], d, dt), inv = on(in[2], d, DType::F32);
    const bool amax = in[4].ptr<int32_t>()[0] != 0;
    Tensor x_amax = amax_slot(amax, d), dx_amax = amax_slot(amax, d);
    call([&] { ops::rope(x, pos, inv, false, amax_arg(x_amax)); });
    call([&] { ops::rope(dx, pos, inv, /*inverse=*/true, amax_arg(dx_amax)); });
    return Tensors{host_f32(x), host_f32(dx), amax_out(x_amax), amax_out(dx_amax)};
  };
  c.tol_bf16 = 1e-2;
  c.tol_bf16_of = {1e-2, 1e-2, 2e-2, 2e-2};  // an amax is one element: a rounding or two off
  c.backward_of = "rope";
  c.loss = [](const Tensors& in, Device) { return dot(rope_cpu(in[0], in[1], in[2]), in[3]); };
  c.grad_of = {-1, 0};
  // q and k of one layer.
  c.layer_sizes = [](const LayerSizes& l) {
    return with_amax({{l.tokens(), l.heads, l.head_dim, l.seq}, {l.tokens(), l.kv_heads, l.head_dim, l.seq}});
  };
  c.cost = [](const Sizes& s, double act) { return Cost{2.0 * double(s[0] * s[1] * s[2]) * act, 0}; };
  return c;
}

Tensor swiglu_cpu(const Tensor& g, const Tensor& u) {
  Tensor out = out_like(g.shape(), kCpu, DType::F32);
  ops::swiglu(g, u, out);
  return out;
}

std::vector<OpCase> swiglu_cases() {
  const std::vector<Sizes> shapes = {{1, 1}, {2, 50}, {3, 50}, {7, 172}, {33, 1000}, {7, 1031}, {5, 4099}, {4, 11008}};
  OpCase f{"swiglu"};
  f.dims = {"rows", "f", "amax"};
  f.sizes = with_amax(shapes);
  f.make = [](const Sizes& s, std::mt19937& rng) {  // gate, up, amax flag
    return Tensors{random_tensor({s[0], s[1]}, rng, -6, 6), random_tensor({s[0], s[1]}, rng),
                   Tensor::from_vector(std::vector<int32_t>{int32_t(s[2])}, {1})};
  };
  f.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    const Tensor g = on(in[0], d, dt), u = on(in[1], d, dt);
    Tensor out = out_like(in[0].shape(), d, dt), amax = amax_slot(in[2].ptr<int32_t>()[0], d);
    call([&] { ops::swiglu(g, u, out, amax_arg(amax)); });
    return Tensors{host_f32(out), amax_out(amax)};
  };
  f.tol_bf16 = 1e-2;
  f.tol_bf16_of = {1e-2, 2e-2};  // out; its amax (one element)
  f.layer_sizes = [](const LayerSizes& l) { return with_amax({{l.tokens(), l.intermediate}}); };
  f.cost = [](const Sizes& s, double act) { return Cost{3.0 * double(s[0] * s[1]) * act, 0}; };

  // in_place: dgate over gate and dup over up, as the MLP saves memory.
  OpCase b{"swiglu_backward"};
  b.dims = {"rows", "f", "in_place", "amax"};
  for (const Sizes& s : shapes)
    for (int64_t in_place : {0, 1}) b.sizes.push_back({s[0], s[1], in_place});
  b.sizes = with_amax(b.sizes);
  b.make = [](const Sizes& s, std::mt19937& rng) {  // dout, gate, up, {in_place, amax} as I32 [2]
    return Tensors{random_tensor({s[0], s[1]}, rng), random_tensor({s[0], s[1]}, rng, -6, 6),
                   random_tensor({s[0], s[1]}, rng),
                   Tensor::from_vector(std::vector<int32_t>{int32_t(s[2]), int32_t(s[3])}, {2})};
  };
  b.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    const int32_t* f = in[3].ptr<int32_t>();
    const bool in_place = f[0] != 0;
    const Tensor dout = on(in[0], d, dt), g = on(in[1], d, dt), u = on(in[2], d, dt);
    Tensor dg = in_place ? g : out_like(g.shape(), d, dt), du = in_place ? u : out_like(g.shape(), d, dt);
    Tensor dg_amax = amax_slot(f[1], d), du_amax = amax_slot(f[1], d);
    call([&] { ops::swiglu_backward(dout, g, u, dg, du, amax_arg(dg_amax), amax_arg(du_amax)); });
    return Tensors{host_f32(dg), host_f32(du), amax_out(dg_amax), amax_out(du_amax)};
  };
  b.tol_bf16 = 1e-2;
  b.tol_bf16_of = {1e-2, 1e-2, 2e-2, 2e-2};  // dgate, dup; their amaxes (one element each)
  b.backward_of = "swiglu";
  b.loss = [](const Tensors& in, Device) { return dot(swiglu_cpu(in[1], in[2]), in[0]); };
  b.grad_of = {1, 2};
  b.layer_sizes = [](const LayerSizes& l) { return with_amax({{l.tokens(), l.intermediate, 1}}); };
  b.cost = [](const Sizes& s, double act) { return Cost{5.0 * double(s[0] * s[1]) * act, 0}; };
  return {f, b};
}

std::vector<OpCase> embedding_cases() {
  const std::vector<Sizes> sizes = {{5, 3, 1},    {50, 40, 17},     {1000, 64, 300}, {7, 8, 1},
                                    {7, 172, 300}, {512, 4096, 33}, {1000, 173, 65}};
  const auto layer = [](const LayerSizes& l) { return std::vector<Sizes>{{l.vocab, l.hidden, l.tokens()}}; };
  OpCase f{"embedding"};
  f.dims = {"v", "d", "t"};
  f.sizes = sizes;
  f.make = [](const Sizes& s, std::mt19937& rng) {
    return Tensors{random_tensor({s[0], s[1]}, rng), random_ids({s[2]}, int32_t(s[0]), rng)};
  };
  f.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    const Tensor table = on(in[0], d, dt), ids = on(in[1], d, dt);
    Tensor out = out_like({in[1].size(0), in[0].size(1)}, d, dt);
    call([&] { ops::embedding(table, ids, out); });
    return Tensors{host_f32(out)};
  };
  f.tol_f32 = f.tol_bf16 = 0;  // a copy of rows
  f.layer_sizes = layer;
  f.cost = [](const Sizes& s, double act) { return Cost{2.0 * double(s[1] * s[2]) * act, 0}; };

  OpCase b{"embedding_backward"};
  b.dims = f.dims;
  b.sizes = sizes;
  b.make = [](const Sizes& s, std::mt19937& rng) {  // dout, ids, table, dtable's start
    return Tensors{random_tensor({s[2], s[1]}, rng), random_ids({s[2]}, int32_t(s[0]), rng),
                   random_tensor({s[0], s[1]}, rng), random_tensor({s[0], s[1]}, rng)};
  };
  b.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    const Tensor dout = on(in[0], d, dt), ids = on(in[1], d, dt);
    Tensor dtable = on(in[3], d, DType::F32);
    call([&] { ops::embedding_backward(dout, ids, dtable); });
    return Tensors{host_f32(dtable)};
  };
  // L = Σ dout·embedding(table) + Σ dtable₀·table: accumulating into dtable₀ is ∂L/∂table.
  b.backward_of = "embedding";
  b.loss = [](const Tensors& in, Device) {
    Tensor out = out_like(in[0].shape(), kCpu, DType::F32);
    ops::embedding(in[2], in[1], out);
    return dot(out, in[0]) + dot(in[2], in[3]);
  };
  b.grad_of = {2};
  b.tol_bf16 = 1e-5;  // F32 sums of exact BF16 values
  b.layer_sizes = layer;
  // dout read, the rows of dtable read and written (F32).
  b.cost = [](const Sizes& s, double act) { return Cost{double(s[1] * s[2]) * (act + 8), 0}; };
  return {f, b};
}

// mode 0: dlogits in the logits' dtype; 1: dlogits written over the logits; 2: losses only;
// 3: BF16 dlogits of F32 logits (the loss head's path). Every 4th row and row 1 are ignored.
OpCase cross_entropy_case() {
  OpCase c{"cross_entropy"};
  c.dims = {"t", "v", "mode"};
  for (const Sizes& s : std::vector<Sizes>{{1, 2}, {4, 12}, {9, 1000}, {3, 32000}, {1, 7}, {7, 512}, {33, 1001},
                                           {9, 32000}, {3, 32003}})
    for (int64_t mode : {0, 1, 3}) c.sizes.push_back({s[0], s[1], mode});
  c.sizes.push_back({17, 32000, 2});
  c.make = [](const Sizes& s, std::mt19937& rng) {  // logits, targets, mode as I32 [1]
    Tensor t = random_ids({s[0]}, int32_t(s[1]), rng);
    for (int64_t i = 1; i < s[0]; i += i == 1 ? 2 : 4) t.ptr<int32_t>()[i] = ops::kIgnoreIndex;
    return Tensors{random_tensor({s[0], s[1]}, rng, -8, 8), t,
                   Tensor::from_vector(std::vector<int32_t>{int32_t(s[2])}, {1})};
  };
  c.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    const int32_t mode = in[2].ptr<int32_t>()[0];
    const Tensor targets = on(in[1], d, dt);
    Tensor logits = on(in[0], d, mode == 3 ? DType::F32 : dt), losses = out_like({in[0].size(0)}, d, DType::F32);
    Tensor dl = mode == 1 ? logits : out_like(in[0].shape(), d, mode == 3 ? DType::BF16 : dt);
    call([&] { ops::cross_entropy(logits, targets, losses, mode == 2 ? nullptr : &dl, 0.25f); });
    if (mode == 2) return Tensors{host_f32(losses), none(), none()};
    // The ignored rows' losses and gradients, which every backend must leave at zero.
    std::vector<float> ignored, l = losses.to_float_vector(), g = dl.to_float_vector();
    const int64_t v = in[0].size(1);
    for (int64_t r = 0; r < in[0].size(0); ++r)
      if (in[1].ptr<int32_t>()[r] == ops::kIgnoreIndex) {
        ignored.push_back(l[size_t(r)]);
        ignored.insert(ignored.end(), g.begin() + r * v, g.begin() + (r + 1) * v);
      }
    return Tensors{host_f32(losses), host_f32(dl), Tensor::from_vector(ignored, {int64_t(ignored.size())})};
  };
  c.tol_bf16_of = {1e-5, 1e-2, 1e-5};  // losses (fp32 on exact inputs); dlogits; zeros
  // A loss in nats and a gradient against its scale (0.25 here): the CPU sums in double, CUDA in
  // fp32, so a confident row (loss ~1e-5, the target's gradient p - 1 ~ -1e-5) differs by fp32's
  // rounding of logits ~8, which is ~1e-3 of such a value (measured on the H200: 4.4e-3 at t=1 v=2).
  c.scale_floor_of = {1.0, 0.25, 0.0};
  // dlogits is its own backward: ∂(0.25·Σ losses)/∂logits.
  c.backward_of = "cross_entropy";
  c.loss = [](const Tensors& in, Device) {
    Tensor losses = out_like({in[0].size(0)}, kCpu, DType::F32);
    ops::cross_entropy(in[0], in[1], losses);
    return 0.25 * dot(losses, Tensor::from_vector(std::vector<float>(size_t(losses.numel()), 1.0f), losses.shape()));
  };
  c.grad_of = {-1, 0, -1};
  c.fd_max_elements = 100;  // the softmax of a large vocabulary leaves each logit too small a share
  // One chunk of the loss head, the gradient written over the logits.
  c.layer_sizes = [](const LayerSizes& l) { return std::vector<Sizes>{{l.loss_rows, l.vocab, 1}}; };
  c.cost = [](const Sizes& s, double act) { return Cost{2.0 * double(s[0] * s[1]) * act, 0}; };
  return c;
}

}  // namespace

std::vector<OpCase> math_cases() {
  std::vector<OpCase> v{rope_case()};
  for (auto part : {swiglu_cases(), embedding_cases()})
    for (OpCase& c : part) v.push_back(c);
  v.push_back(cross_entropy_case());
  return v;
}

}  // namespace loft::cases
