// The parity harness's shared helpers and the whole table (the rows are in op_cases_*.cpp).
#include "tests/ops/cases/op_cases.h"

#include <algorithm>

#include "engine/ops/ops.h"
#include "tests/common/test_util.h"

namespace loft::test::parity {

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> all = [] {
    std::vector<OpCase> v;
    for (auto part : {math_cases, attention_cases, optim_cases})
      for (OpCase& c : part()) v.push_back(std::move(c));
    return v;
  }();
  return all;
}

std::vector<std::string> op_table_names() {
  return {
#define LOFT_OP(ret, name, params, args) #name,
#include "engine/ops/op_list.def"
#undef LOFT_OP
  };
}

Tensor on(const Tensor& t, Device device, DType dt) {
  Tensor d = t.to(device);
  if (t.dtype() != DType::F32 || dt == DType::F32) return d;
  Tensor out = Tensor::empty(t.shape(), dt, device);
  ops::convert(d, out);
  return out;
}

Tensor out_like(const Shape& shape, Device device, DType dt) { return Tensor::zeros(shape, dt, device); }

Tensor host_f32(const Tensor& t) {
  if (t.dtype() != DType::I32) return Tensor::from_vector(t.to_float_vector(), t.shape());
  std::vector<float> v;
  for (int64_t x : t.to_int_vector()) v.push_back(float(x));
  return Tensor::from_vector(v, t.shape());
}

Tensor scalar(double v) { return Tensor::from_vector(std::vector<float>{float(v)}, {1}); }

double dot(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_float_vector(), y = b.to_float_vector();
  double s = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) s += double(x[i]) * double(y[i]);
  return s;
}

Tensors round_to_bf16(const Tensors& in) {
  Tensors out;
  for (const Tensor& t : in) {
    if (t.dtype() != DType::F32) {
      out.push_back(t);
      continue;
    }
    out.push_back(host_f32(on(t, Device::cpu(), DType::BF16)));
  }
  return out;
}

double fd_error(const OpCase& c, const Tensors& in, int input, const Tensor& grad, float eps) {
  const std::vector<float> g = grad.to_float_vector();
  std::vector<float> want, got;
  const int64_t n = in[size_t(input)].numel(), step = std::max<int64_t>(n / 23, 1);
  for (int64_t i = 0; i < n; i += step) {
    Tensors plus = in, minus = in;
    plus[size_t(input)] = in[size_t(input)].clone();
    minus[size_t(input)] = in[size_t(input)].clone();
    plus[size_t(input)].ptr<float>()[i] += eps;
    minus[size_t(input)].ptr<float>()[i] -= eps;
    want.push_back(float((c.loss(plus, Device::cpu()) - c.loss(minus, Device::cpu())) / (2.0 * double(eps))));
    got.push_back(g[size_t(i)]);
  }
  return rel_error(got, want);
}

int expect_backward_matches_differences(Device device, uint32_t seed) {
  int checked = 0;
  for (const OpCase& c : op_cases()) {
    if (c.backward_of.empty()) continue;
    for (size_t i = 0; i < c.sizes.size(); ++i) {
      std::mt19937 rng(seed + uint32_t(i));
      const Tensors in = c.make(c.sizes[i], rng);
      if (!fd_size(c, in)) continue;
      const Tensors out = c.run(in, device, DType::F32);
      for (size_t o = 0; o < c.grad_of.size(); ++o) {
        if (c.grad_of[o] < 0) continue;
        EXPECT_LT(fd_error(c, in, c.grad_of[o], out[o]), c.tol_fd)
            << c.op << " on " << device.str() << ", size " << i << ": d/d input " << c.grad_of[o];
        ++checked;
      }
    }
  }
  return checked;
}

bool fd_size(const OpCase& c, const Tensors& in) {
  for (const Tensor& t : in)
    if (t.numel() > c.fd_max_elements) return false;
  return true;
}

}  // namespace loft::test::parity
