// Parity rows of the optimizer ops (F32 only: the optimizer state is fp32 on every backend).
#include <cmath>

#include "engine/ops/ops.h"
#include "tests/common/test_util.h"
#include "tests/ops/cases/op_cases.h"

namespace loft::test::parity {
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

OpCase adamw_case() {
  OpCase c = f32_case("adamw");
  c.sizes = {{1}, {7}, {4099}, {(1 << 16) + 5}};
  c.make = [](const Sizes& s, std::mt19937& rng) {  // param, grad, m, v
    return Tensors{random_tensor({s[0]}, rng), random_tensor({s[0]}, rng), random_tensor({s[0]}, rng, -0.1f, 0.1f),
                   positive(random_tensor({s[0]}, rng, 0, 0.01f))};
  };
  c.run = [](const Tensors& in, Device d, DType) {
    Tensor p = in[0].to(d), m = in[2].to(d), v = in[3].to(d);
    ops::adamw(p, in[1].to(d), m, v, kStep);
    return Tensors{host_f32(p), host_f32(m), host_f32(v)};
  };
  c.tol_f32 = 1e-6;  // both round each operation alike (adamw_math.h)
  return c;
}

OpCase sum_squares_case() {
  OpCase c = f32_case("sum_squares");
  c.sizes = {{0}, {1}, {4099}, {(1 << 20) + 3}};
  c.make = [](const Sizes& s, std::mt19937& rng) { return Tensors{random_tensor({s[0]}, rng)}; };
  c.run = [](const Tensors& in, Device d, DType) { return Tensors{scalar(ops::sum_squares(in[0].to(d)))}; };
  c.tol_f32 = 1e-6;
  return c;
}

// k tensors of n + i elements each: the multi-tensor ops' lists.
const std::vector<Sizes> kListSizes = {{1, 5}, {3, 4099}, {7, 33}};

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
  c.sizes = kListSizes;
  c.make = [](const Sizes& s, std::mt19937& rng) {
    Tensors g;
    for (int64_t i = 0; i < s[0]; ++i) g.push_back(random_tensor({s[1] + i}, rng));
    return g;
  };
  c.run = [](const Tensors& in, Device d, DType) {
    ops::AdamWTensors t = tensors_on(in, d, false);
    Tensor scale = Tensor::zeros({1}, DType::F32, d);
    const double norm = ops::grad_norm_clip(t, 0.5, scale);
    return Tensors{scalar(norm), host_f32(scale)};
  };
  c.tol_f32 = 1e-6;
  return c;
}

OpCase adamw_all_case() {
  OpCase c = f32_case("adamw_all");
  c.sizes = kListSizes;
  c.make = [](const Sizes& s, std::mt19937& rng) {  // per tensor: param, grad, m, v
    Tensors in;
    for (int64_t i = 0; i < s[0]; ++i) {
      const Shape sh{s[1] + i};
      for (Tensor t : {random_tensor(sh, rng), random_tensor(sh, rng), random_tensor(sh, rng, -0.1f, 0.1f),
                       positive(random_tensor(sh, rng, 0, 0.01f))})
        in.push_back(t);
    }
    return in;
  };
  c.run = [](const Tensors& in, Device d, DType) {
    ops::AdamWTensors t = tensors_on(in, d, true);
    Tensor scale = Tensor::from_vector(std::vector<float>{0.5f}, {1}).to(d);
    ops::adamw_all(t, &scale, kStep);
    Tensors out;
    for (size_t i = 0; i < t.params.size(); ++i)
      for (const Tensor* x : {&t.params[i], &t.grads[i], &t.m[i], &t.v[i]}) out.push_back(host_f32(*x));
    return out;
  };
  c.tol_f32 = 1e-6;
  return c;
}

}  // namespace

std::vector<OpCase> optim_cases() {
  return {adamw_case(), sum_squares_case(), grad_norm_clip_case(), adamw_all_case()};
}

}  // namespace loft::test::parity
