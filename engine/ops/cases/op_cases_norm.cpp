// Rows of the RMSNorm ops: odd widths (D = 1 included), 3-D inputs, a weight in F32 beside BF16
// activations, accumulation into a non-zero dweight, dx written over dy or add, and the fused
// forms with operands misaligned (scalar paths; a residual aligned unlike x).
#include "engine/ops/cases/op_cases.h"
#include "engine/ops/ops.h"

namespace loft::cases {
namespace {

constexpr float kEps = 1e-5f;

// lead, rows, D: x is [lead, rows, D] (lead 1: [rows, D]).
const std::vector<Sizes> kPlainShapes = {{1, 1, 8},  {1, 3, 40},   {1, 7, 172},   {1, 17, 1000}, {1, 5, 4096},
                                         {1, 33, 4096}, {2, 3, 172}, {1, 1000, 173}, {1, 3, 1}};
const std::vector<Sizes> kFusedShapes = {{1, 1, 40},   {1, 3, 40},   {1, 257, 40}, {1, 1, 4100}, {1, 3, 4100},
                                         {1, 257, 4100}, {1, 33, 4096}, {2, 3, 173}, {1, 5, 1}};

Shape shape_of(const Sizes& s) { return s[0] == 1 ? Shape{s[1], s[2]} : Shape{s[0], s[1], s[2]}; }
int64_t rows_of(const Tensor& x) { return x.numel() / x.size(x.dim() - 1); }

// Every shape with the weight in the activations' dtype and in F32, then each `extra` tail.
std::vector<Sizes> with(const std::vector<Sizes>& shapes, const std::vector<Sizes>& extra) {
  std::vector<Sizes> v;
  for (const Sizes& s : shapes)
    for (int64_t w_f32 : {0, 1})
      for (const Sizes& e : extra) {
        Sizes z = s;
        z.push_back(w_f32);
        z.insert(z.end(), e.begin(), e.end());
        v.push_back(z);
      }
  return v;
}

// The offsets of (x, the other operand): aligned, both unaligned, the other alone unaligned.
const std::vector<Sizes> kOffsets = {{0, 0}, {1, 1}, {0, 1}};

Tensor weight_on(const Tensor& w, const Tensor& flags, Device d, DType dt) {
  return on(w, d, flags.ptr<int32_t>()[0] ? DType::F32 : dt);
}

// y = rmsnorm(x) on the CPU in F32 (the rows' losses).
Tensor rmsnorm_cpu(const Tensor& x, const Tensor& w) {
  Tensor y = out_like(x.shape(), Device::cpu(), DType::F32);
  ops::rmsnorm(x, w, kEps, y);
  return y;
}

// The flags of a size (entries from 3 on) as I32, the last input of every row.
Tensor flags(const Sizes& s) {
  std::vector<int32_t> f(s.begin() + 3, s.end());
  return Tensor::from_vector(f, {int64_t(f.size())});
}

std::vector<Sizes> one_layer(const LayerSizes& l, const Sizes& tail) {
  Sizes s{1, l.tokens(), l.hidden};
  s.insert(s.end(), tail.begin(), tail.end());
  return {s};
}

Cost io(const Sizes& s, double act, double passes) { return {passes * double(s[0] * s[1] * s[2]) * act, 0}; }

OpCase rmsnorm_case() {
  OpCase c{"rmsnorm"};
  c.dims = {"lead", "rows", "d", "w_f32", "amax"};
  c.sizes = with_amax(with(kPlainShapes, {{}}));
  c.make = [](const Sizes& s, std::mt19937& rng) {  // x, w, flags
    return Tensors{random_tensor(shape_of(s), rng, -2, 2), random_tensor({s[2]}, rng, 0.5f, 1.5f), flags(s)};
  };
  c.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    const Tensor x = on(in[0], d, dt), w = weight_on(in[1], in[2], d, dt);
    Tensor y = out_like(x.shape(), d, dt), rstd = out_like({rows_of(x)}, d, DType::F32);
    Tensor amax = amax_slot(in[2].ptr<int32_t>()[1], d);
    call([&] { ops::rmsnorm(x, w, kEps, y, &rstd, amax_arg(amax)); });
    return Tensors{host_f32(y), host_f32(rstd), amax_out(amax)};
  };
  c.tol_bf16_of = {1e-2, 1e-5, 2e-2};  // y; rstd (F32); max |y| (one element: a rounding or two)
  c.layer_sizes = [](const LayerSizes& l) { return with_amax(one_layer(l, {0})); };
  c.cost = [](const Sizes& s, double act) { return io(s, act, 2); };
  return c;
}

// mode 0: dx fresh, dweight accumulated; 1: dx over dy, dweight accumulated; 2: no dweight.
OpCase rmsnorm_backward_case() {
  OpCase c{"rmsnorm_backward"};
  c.dims = {"lead", "rows", "d", "w_f32", "mode"};
  c.sizes = with(kPlainShapes, {{0}, {1}, {2}});
  c.make = [](const Sizes& s, std::mt19937& rng) {  // dy, x, w, dweight's start, flags
    return Tensors{random_tensor(shape_of(s), rng), random_tensor(shape_of(s), rng, -2, 2),
                   random_tensor({s[2]}, rng, 0.5f, 1.5f), random_tensor({s[2]}, rng), flags(s)};
  };
  c.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    const int32_t mode = in[4].ptr<int32_t>()[1];
    const Tensor x = on(in[1], d, dt), w = weight_on(in[2], in[4], d, dt);
    Tensor y = out_like(x.shape(), d, dt), rstd = out_like({rows_of(x)}, d, DType::F32);
    ops::rmsnorm(x, w, kEps, y, &rstd);
    Tensor dy = on(in[0], d, dt), dw = on(in[3], d, DType::F32);
    Tensor dx = mode == 1 ? dy : out_like(x.shape(), d, dt);
    call([&] { ops::rmsnorm_backward(dy, x, w, rstd, dx, mode == 2 ? nullptr : &dw); });
    // With D = 1, dx is ~eps/x² times two O(1) terms that cancel: no relative bound holds.
    return Tensors{x.size(x.dim() - 1) > 1 ? host_f32(dx) : none(), mode == 2 ? none() : host_f32(dw)};
  };
  // L = Σ dy·rmsnorm(x) + Σ dweight₀·w: accumulating into dweight₀ is ∂L/∂w.
  c.backward_of = "rmsnorm";
  c.loss = [](const Tensors& in, Device) { return dot(rmsnorm_cpu(in[1], in[2]), in[0]) + dot(in[2], in[3]); };
  c.grad_of = {1, 2};
  c.tol_bf16_of = {1e-2, 1e-5};  // dx; dweight (F32 sums of exact products)
  c.layer_sizes = [](const LayerSizes& l) { return one_layer(l, {0, 2}); };
  c.cost = [](const Sizes& s, double act) { return io(s, act, 3); };
  return c;
}

// x (x_off into its buffer) += residual (r_off into its own), then y = rmsnorm(x).
OpCase add_rmsnorm_case() {
  OpCase c{"add_rmsnorm"};
  c.dims = {"lead", "rows", "d", "w_f32", "x_off", "r_off", "amax"};
  c.sizes = with_amax(with(kFusedShapes, kOffsets));
  c.make = [](const Sizes& s, std::mt19937& rng) {  // residual, x, w, flags
    return Tensors{random_tensor(shape_of(s), rng, -2, 2), random_tensor(shape_of(s), rng, -2, 2),
                   random_tensor({s[2]}, rng, 0.5f, 1.5f), flags(s)};
  };
  c.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    const int32_t* f = in[3].ptr<int32_t>();
    const Tensor res = placed(in[0], d, dt, f[2]), w = weight_on(in[2], in[3], d, dt);
    Tensor x = placed(in[1], d, dt, f[1]), y = out_like(x.shape(), d, dt);
    Tensor rstd = out_like({rows_of(x)}, d, DType::F32), amax = amax_slot(f[3], d);
    call([&] { ops::add_rmsnorm(res, x, w, kEps, y, &rstd, amax_arg(amax)); });
    return Tensors{host_f32(x), host_f32(y), host_f32(rstd), amax_out(amax)};
  };
  c.tol_bf16_of = {1e-2, 2e-2, 1e-2, 2e-2};  // the sum x; y; rstd; max |y|
  c.layer_sizes = [](const LayerSizes& l) { return with_amax(one_layer(l, {0, 0, 0})); };
  c.cost = [](const Sizes& s, double act) { return io(s, act, 4); };
  return c;
}

// mode 0: dx fresh, dweight accumulated; 1: dx over add; 2: dx over dy (x and dy x_off into their
// buffers, add a_off).
OpCase rmsnorm_backward_add_case() {
  OpCase c{"rmsnorm_backward_add"};
  c.dims = {"lead", "rows", "d", "w_f32", "x_off", "a_off", "mode", "amax"};
  c.sizes = with_amax(with(kFusedShapes, [] {
    std::vector<Sizes> v;
    for (const Sizes& o : kOffsets)
      for (int64_t mode : {0, 1, 2}) v.push_back({o[0], o[1], mode});
    return v;
  }()));
  c.make = [](const Sizes& s, std::mt19937& rng) {  // dy, x, w, add, dweight's start, flags
    return Tensors{random_tensor(shape_of(s), rng), random_tensor(shape_of(s), rng, -2, 2),
                   random_tensor({s[2]}, rng, 0.5f, 1.5f), random_tensor(shape_of(s), rng),
                   random_tensor({s[2]}, rng), flags(s)};
  };
  c.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    const int32_t* f = in[5].ptr<int32_t>();
    const int32_t mode = f[3];
    const Tensor x = placed(in[1], d, dt, f[1]), w = weight_on(in[2], in[5], d, dt);
    Tensor y = out_like(x.shape(), d, dt), rstd = out_like({rows_of(x)}, d, DType::F32);
    ops::rmsnorm(x, w, kEps, y, &rstd);
    Tensor dy = placed(in[0], d, dt, f[1]), add = placed(in[3], d, dt, f[2]), dw = on(in[4], d, DType::F32);
    Tensor dx = mode == 1 ? add : mode == 2 ? dy : out_like(x.shape(), d, dt);
    Tensor amax = amax_slot(f[4], d);
    call([&] { ops::rmsnorm_backward_add(dy, x, w, rstd, add, dx, mode == 0 ? &dw : nullptr, amax_arg(amax)); });
    // With D = 1, dx (and so its amax) is ~eps/x² times two O(1) terms that cancel.
    const bool bounded = x.size(x.dim() - 1) > 1;
    return Tensors{bounded ? host_f32(dx) : none(), mode == 0 ? host_f32(dw) : none(),
                   bounded ? amax_out(amax) : none()};
  };
  // L = Σ dy·rmsnorm(x) + Σ add·x + Σ dweight₀·w: the norm's input also feeds the residual path.
  c.backward_of = "rmsnorm";
  c.loss = [](const Tensors& in, Device) {
    return dot(rmsnorm_cpu(in[1], in[2]), in[0]) + dot(in[1], in[3]) + dot(in[2], in[4]);
  };
  c.grad_of = {1, 2};
  c.tol_bf16_of = {1e-2, 1e-5, 2e-2};  // dx; dweight; max |dx|
  c.layer_sizes = [](const LayerSizes& l) { return with_amax(one_layer(l, {0, 0, 0, 2})); };
  c.cost = [](const Sizes& s, double act) { return io(s, act, 4); };
  return c;
}

}  // namespace

std::vector<OpCase> norm_cases() {
  return {rmsnorm_case(), rmsnorm_backward_case(), add_rmsnorm_case(), rmsnorm_backward_add_case()};
}

}  // namespace loft::cases
