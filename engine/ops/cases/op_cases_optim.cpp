// Parity rows of the optimizer ops (F32 only: the optimizer state is fp32 on every backend).
#include <cmath>

#include "engine/ops/cases/op_cases.h"
#include "engine/ops/ops.h"

namespace loft::cases {
namespace {

const ops::AdamWStep kStep{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01, .step = 3};

Tensor positive(Tensor t) {
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = std::fabs(t.ptr<float>()[i]);
  return t;
}

OpCase f32_case(const char* op) {
  OpCase c{op};
  c.bf16 = false;
  return c;
}

// One adapter matrix of a layer (rank 64 over the hidden width), and the layer's 14 of them (A and
// B of its 7 projections) for the multi-tensor ops.
int64_t adapter_tensor(const LayerSizes& l) { return 64 * l.hidden; }

// steps 1: one update from a random state at step 3; steps > 1: a fresh optimizer (m = v = 0)
// taking steps 1, 2, ... with a new small gradient each, as training starts. wd_pct: weight decay
// in hundredths.
OpCase adamw_case() {
  OpCase c = f32_case("adamw");
  c.dims = {"n", "wd_pct", "steps"};
  c.sizes = {{1, 1, 1}, {7, 1, 1}, {4099, 1, 1}, {(1 << 16) + 5, 1, 1}};
  for (int64_t wd : {0, 10})
    for (int64_t n : {1, 7, 172, 100003}) c.sizes.push_back({n, wd, 3});
  c.make = [](const Sizes& s, std::mt19937& rng) {  // param, m, v, then a grad per step
    const Shape sh{s[0]};
    const bool fresh = s[2] > 1;
    Tensors in{random_tensor(sh, rng), fresh ? Tensor::zeros(sh, DType::F32) : random_tensor(sh, rng, -0.1f, 0.1f),
               fresh ? Tensor::zeros(sh, DType::F32) : positive(random_tensor(sh, rng, 0, 0.01f))};
    for (int64_t i = 0; i < s[2]; ++i) in.push_back(fresh ? random_tensor(sh, rng, -1e-3f, 1e-3f) : random_tensor(sh, rng));
    in.push_back(Tensor::from_vector(std::vector<int32_t>{int32_t(s[1])}, {1}));
    return in;
  };
  c.run = [](const Tensors& in, Device d, DType, const Call& call) {
    Tensor p = in[0].to(d), m = in[1].to(d), v = in[2].to(d);
    const int64_t steps = int64_t(in.size()) - 4;
    ops::AdamWStep s = kStep;
    s.weight_decay = in.back().ptr<int32_t>()[0] / 100.0;
    Tensors out;
    for (int64_t i = 0; i < steps; ++i) {
      if (steps > 1) s.step = i + 1;
      const Tensor g = in[size_t(3 + i)].to(d);
      call([&] { ops::adamw(p, g, m, v, s); });
      for (const Tensor* t : {&p, &m, &v}) out.push_back(host_f32(*t));
    }
    return out;
  };
  c.tol_f32 = 1e-6;  // both round each operation alike (adamw_math.h)
  c.layer_sizes = [](const LayerSizes& l) { return std::vector<Sizes>{{adapter_tensor(l), 1, 1}}; };
  c.cost = [](const Sizes& s, double) { return Cost{28.0 * double(s[0]), 0}; };  // p, m, v in and out; g in
  return c;
}

OpCase sum_squares_case() {
  OpCase c = f32_case("sum_squares");
  c.dims = {"n"};
  c.sizes = {{0}, {1}, {7}, {172}, {4099}, {(1 << 20) + 3}, {(1 << 22) + 3}};
  c.make = [](const Sizes& s, std::mt19937& rng) { return Tensors{random_tensor({s[0]}, rng, -3, 3)}; };
  c.run = [](const Tensors& in, Device d, DType, const Call& call) {
    const Tensor x = in[0].to(d);
    double r = 0;
    call([&] { r = ops::sum_squares(x); });
    return Tensors{scalar(r)};
  };
  c.tol_f32 = 1e-9;  // sums in double
  c.exact = {{DType::F32, {Tensor::from_vector(std::vector<float>{1, -2, 3}, {3})}, {scalar(14)}},
             {DType::F32, {Tensor::zeros({0}, DType::F32)}, {scalar(0)}}};
  c.layer_sizes = [](const LayerSizes& l) { return std::vector<Sizes>{{adapter_tensor(l)}}; };
  c.cost = [](const Sizes& s, double) { return Cost{4.0 * double(s[0]), 0}; };
  return c;
}

// k tensors of n + i elements each: the multi-tensor ops' lists.
const std::vector<Sizes> kListSizes = {{1, 5}, {3, 4099}, {7, 33}};

std::vector<Sizes> layer_adapter(const LayerSizes& l) { return {{14, adapter_tensor(l)}}; }

ops::AdamWTensors tensors_on(const Tensors& in, Device d, bool with_state) {
  ops::AdamWTensors t;
  const size_t k = with_state ? in.size() / 4 : in.size();
  for (size_t i = 0; i < k; ++i) {
    if (!with_state) {
      t.grads.push_back(in[i].to(d));
      continue;
    }
    t.params.push_back(in[4 * i].to(d));
    t.grads.push_back(in[4 * i + 1].to(d));
    t.m.push_back(in[4 * i + 2].to(d));
    t.v.push_back(in[4 * i + 3].to(d));
  }
  return t;
}

OpCase grad_norm_clip_case() {
  OpCase c = f32_case("grad_norm_clip");
  c.dims = {"k", "n"};
  c.sizes = kListSizes;
  c.make = [](const Sizes& s, std::mt19937& rng) {
    Tensors g;
    for (int64_t i = 0; i < s[0]; ++i) g.push_back(random_tensor({s[1] + i}, rng));
    return g;
  };
  c.run = [](const Tensors& in, Device d, DType, const Call& call) {
    ops::AdamWTensors t = tensors_on(in, d, false);
    Tensor scale = Tensor::zeros({1}, DType::F32, d);
    double norm = 0;
    call([&] { norm = ops::grad_norm_clip(t, 0.5, scale); });
    return Tensors{scalar(norm), host_f32(scale)};
  };
  c.tol_f32 = 1e-6;
  c.layer_sizes = layer_adapter;
  c.cost = [](const Sizes& s, double) { return Cost{4.0 * double(s[0] * s[1]), 0}; };
  return c;
}

// copies: 0 none; 1 or 2 a BF16 or F16 copy of every other param (the others none), written with
// the update (AdamWTensors::copies).
OpCase adamw_all_case() {
  OpCase c = f32_case("adamw_all");
  c.dims = {"k", "n", "copies"};
  for (const Sizes& s : kListSizes)
    for (int64_t copies : {0, 1, 2}) c.sizes.push_back({s[0], s[1], copies});
  c.make = [](const Sizes& s, std::mt19937& rng) {  // per tensor: param, grad, m, v; then copies
    Tensors in;
    for (int64_t i = 0; i < s[0]; ++i) {
      const Shape sh{s[1] + i};
      for (Tensor t : {random_tensor(sh, rng), random_tensor(sh, rng), random_tensor(sh, rng, -0.1f, 0.1f),
                       positive(random_tensor(sh, rng, 0, 0.01f))})
        in.push_back(t);
    }
    in.push_back(Tensor::from_vector(std::vector<int32_t>{int32_t(s[2])}, {1}));
    return in;
  };
  c.run = [](const Tensors& in, Device d, DType, const Call& call) {
    ops::AdamWTensors t = tensors_on(in, d, true);
    const int32_t copies = in.back().ptr<int32_t>()[0];
    for (size_t i = 0; copies && i < t.params.size(); ++i)
      t.copies.push_back(i % 2 ? Tensor{} : Tensor::zeros(t.params[i].shape(), copies == 1 ? DType::BF16 : DType::F16, d));
    const Tensor scale = Tensor::from_vector(std::vector<float>{0.5f}, {1}).to(d);
    call([&] { ops::adamw_all(t, &scale, kStep); });
    Tensors out;
    for (size_t i = 0; i < t.params.size(); ++i) {
      for (const Tensor* x : {&t.params[i], &t.grads[i], &t.m[i], &t.v[i]}) out.push_back(host_f32(*x));
      if (i < t.copies.size() && t.copies[i].defined()) out.push_back(host_f32(t.copies[i]));
    }
    return out;
  };
  c.tol_f32 = 1e-6;
  c.layer_sizes = [](const LayerSizes& l) { return std::vector<Sizes>{{14, adapter_tensor(l), 0}, {14, adapter_tensor(l), 1}}; };
  // p, m, v read and written; g read and zeroed; with copies, half the params also written in 2 bytes.
  c.cost = [](const Sizes& s, double) { return Cost{(32.0 + (s[2] ? 1.0 : 0.0)) * double(s[0] * s[1]), 0}; };
  return c;
}

}  // namespace

std::vector<OpCase> optim_cases() {
  return {adamw_case(), sum_squares_case(), grad_norm_clip_case(), adamw_all_case()};
}

}  // namespace loft::cases
