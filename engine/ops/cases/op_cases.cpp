// The op table's cases: the whole table (the rows are in op_cases_*.cpp) and the helpers rows
// share.
#include "engine/ops/cases/op_cases.h"

#include "engine/ops/ops.h"

namespace loft::cases {

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> all = [] {
    std::vector<OpCase> v;
    for (auto part : {gemm_cases, elementwise_cases, norm_cases, head_norm_cases, math_cases, attention_cases, optim_cases})
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

Tensors run_once(const OpCase& c, const Tensors& in, Device device, DType dt) {
  return c.run(in, device, dt, [](const std::function<void()>& op) { op(); });
}

double tolerance(const OpCase& c, DType dt, size_t o) {
  if (dt == DType::F32) return c.tol_f32;
  return o < c.tol_bf16_of.size() ? c.tol_bf16_of[o] : c.tol_bf16;
}

std::string label(const OpCase& c, const Sizes& s) {
  std::string out = c.op;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != 0) out.append(" ").append(i < c.dims.size() ? c.dims[i] : "?").append("=").append(std::to_string(s[i]));
  return out;
}

Tensor on(const Tensor& t, Device device, DType dt) {
  Tensor d = t.to(device);
  if (t.dtype() != DType::F32 || dt == DType::F32) return d;
  Tensor out = Tensor::empty(t.shape(), dt, device);
  ops::convert(d, out);
  return out;
}

Tensor placed(const Tensor& t, Device device, DType dt, int64_t offset) {
  Tensor out = Tensor::zeros({t.numel() + offset}, dt, device).slice(offset, t.numel()).view(t.shape());
  ops::convert(t.to(device), out);
  return out;
}

Tensor out_like(const Shape& shape, Device device, DType dt) { return Tensor::zeros(shape, dt, device); }

Tensor host_f32(const Tensor& t) {
  if (t.dtype() != DType::I32) return Tensor::from_vector(t.to_float_vector(), t.shape());
  std::vector<float> v;
  for (int64_t x : t.to_int_vector()) v.push_back(float(x));
  return Tensor::from_vector(v, t.shape());
}

Tensor scalar(double v) {
  const float hi = float(v);
  return Tensor::from_vector(std::vector<float>{hi, float(v - double(hi))}, {2});
}

Tensor none() { return Tensor::zeros({0}, DType::F32); }

std::vector<Sizes> with_amax(const std::vector<Sizes>& sizes) {
  std::vector<Sizes> v;
  for (const Sizes& s : sizes)
    for (int64_t amax : {0, 1}) {
      v.push_back(s);
      v.back().push_back(amax);
    }
  return v;
}

Tensor amax_slot(bool wanted, Device device) {
  return wanted ? Tensor::zeros({1}, DType::F32, device) : Tensor();
}

Tensor* amax_arg(Tensor& slot) { return slot.defined() ? &slot : nullptr; }

Tensor amax_out(const Tensor& slot) { return slot.defined() ? host_f32(slot) : none(); }

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

}  // namespace loft::cases
