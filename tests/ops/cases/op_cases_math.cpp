// Parity rows of the GEMM, elementwise, norm, RoPE, SwiGLU, embedding and cross-entropy ops.
#include <cmath>

#include "engine/ops/ops.h"
#include "tests/common/test_util.h"
#include "tests/ops/cases/op_cases.h"

namespace loft::test::parity {
namespace {

const Device kCpu = Device::cpu();

Tensor rmsnorm_out(const Tensor& x, const Tensor& w, Device d, DType dt, Tensor* rstd = nullptr) {
  Tensor y = out_like(x.shape(), d, dt);
  ops::rmsnorm(on(x, d, dt), on(w, d, dt), 1e-5f, y, rstd);
  return y;
}

Tensor swiglu_out(const Tensor& g, const Tensor& u) {
  Tensor out = out_like(g.shape(), kCpu, DType::F32);
  ops::swiglu(g, u, out);
  return out;
}

OpCase gemm_case() {
  OpCase c{"gemm"};
  // m, k, n, trans_a, trans_b
  c.sizes = {{3, 5, 7, 0, 0}, {64, 128, 96, 0, 1}, {1, 257, 33, 1, 0}, {130, 70, 9, 1, 1}};
  c.make = [](const Sizes& s, std::mt19937& rng) {  // A, B, C, then the transposes as I32 [2]
    const int64_t m = s[0], k = s[1], n = s[2];
    return Tensors{random_tensor(s[3] ? Shape{k, m} : Shape{m, k}, rng),
                   random_tensor(s[4] ? Shape{n, k} : Shape{k, n}, rng), random_tensor({m, n}, rng),
                   Tensor::from_vector(std::vector<int32_t>{int32_t(s[3]), int32_t(s[4])}, {2})};
  };
  c.run = [](const Tensors& in, Device d, DType dt) {
    Tensor cc = on(in[2], d, dt);
    const int32_t* t = in[3].ptr<int32_t>();
    ops::gemm(on(in[0], d, dt), on(in[1], d, dt), cc, {t[0] != 0, t[1] != 0, 0.5f, 0.25f});
    return Tensors{host_f32(cc)};
  };
  return c;
}

// An op of one input tensor x of n elements, updated in place or written to an output.
OpCase unary_case(const char* op, std::function<Tensor(const Tensor&, Device, DType)> f) {
  OpCase c{op};
  c.sizes = {{1}, {7}, {172}, {4099}, {(1 << 16) + 3}};
  c.make = [](const Sizes& s, std::mt19937& rng) { return Tensors{random_tensor({s[0]}, rng, -100, 100)}; };
  c.run = [f](const Tensors& in, Device d, DType dt) { return Tensors{host_f32(f(in[0], d, dt))}; };
  return c;
}

std::vector<OpCase> elementwise_cases() {
  std::vector<OpCase> v;
  v.push_back(unary_case("convert", [](const Tensor& x, Device d, DType dt) {
    Tensor out = out_like(x.shape(), d, dt);
    ops::convert(on(x, d, DType::F32), out);  // F32 → dt: a copy, or the rounding
    return out;
  }));
  v.back().tol_f32 = v.back().tol_bf16 = 0;
  v.push_back(unary_case("axpy", [](const Tensor& x, Device d, DType dt) {
    Tensor y = on(Tensor::from_vector(std::vector<float>(size_t(x.numel()), 3.5f), x.shape()), d, dt);
    ops::axpy(0.75f, on(x, d, dt), y);
    return y;
  }));
  v.push_back(unary_case("scale", [](const Tensor& x, Device d, DType dt) {
    Tensor y = on(x, d, dt);
    ops::scale(y, -1.25f);
    return y;
  }));
  v.push_back(unary_case("fill_random", [](const Tensor& x, Device d, DType dt) {
    Tensor y = out_like(x.shape(), d, dt);
    ops::fill_random(y, 1234, 0.5f);
    return y;
  }));
  v.back().tol_f32 = 0;  // the same fp32 values on every backend
  return v;
}

const std::vector<Sizes> kNormSizes = {{1, 8}, {3, 40}, {17, 1000}, {5, 4096}};

std::vector<OpCase> norm_cases() {
  std::vector<OpCase> v;
  OpCase f{"rmsnorm"};
  f.sizes = kNormSizes;
  f.make = [](const Sizes& s, std::mt19937& rng) {
    return Tensors{random_tensor({s[0], s[1]}, rng, -2, 2), random_tensor({s[1]}, rng, 0.5f, 1.5f)};
  };
  f.run = [](const Tensors& in, Device d, DType dt) {
    Tensor rstd = out_like({in[0].size(0)}, d, DType::F32);
    Tensor y = rmsnorm_out(in[0], in[1], d, dt, &rstd);
    return Tensors{host_f32(y), host_f32(rstd)};
  };
  v.push_back(f);

  OpCase b{"rmsnorm_backward"};
  b.sizes = kNormSizes;
  b.make = [](const Sizes& s, std::mt19937& rng) {  // dy, x, w
    return Tensors{random_tensor({s[0], s[1]}, rng), random_tensor({s[0], s[1]}, rng, -2, 2),
                   random_tensor({s[1]}, rng, 0.5f, 1.5f)};
  };
  b.run = [](const Tensors& in, Device d, DType dt) {
    Tensor rstd = out_like({in[1].size(0)}, d, DType::F32);
    rmsnorm_out(in[1], in[2], d, dt, &rstd);
    Tensor dx = out_like(in[1].shape(), d, dt), dw = out_like(in[2].shape(), d, DType::F32);
    ops::rmsnorm_backward(on(in[0], d, dt), on(in[1], d, dt), on(in[2], d, dt), rstd, dx, &dw);
    return Tensors{host_f32(dx), host_f32(dw)};
  };
  b.backward_of = "rmsnorm";
  b.loss = [](const Tensors& in, Device d) { return dot(rmsnorm_out(in[1], in[2], d, DType::F32), in[0]); };
  b.grad_of = {1, 2};
  b.tol_bf16 = 3e-2;  // dw sums rows of bf16 products
  v.push_back(b);

  OpCase a{"add_rmsnorm"};
  a.sizes = kNormSizes;
  a.make = [](const Sizes& s, std::mt19937& rng) {  // residual, x, w
    return Tensors{random_tensor({s[0], s[1]}, rng), random_tensor({s[0], s[1]}, rng),
                   random_tensor({s[1]}, rng, 0.5f, 1.5f)};
  };
  a.run = [](const Tensors& in, Device d, DType dt) {
    Tensor x = on(in[1], d, dt), y = out_like(in[1].shape(), d, dt);
    Tensor rstd = out_like({in[1].size(0)}, d, DType::F32);
    ops::add_rmsnorm(on(in[0], d, dt), x, on(in[2], d, dt), 1e-5f, y, &rstd);
    return Tensors{host_f32(x), host_f32(y), host_f32(rstd)};
  };
  v.push_back(a);

  OpCase ba{"rmsnorm_backward_add"};
  ba.sizes = kNormSizes;
  ba.make = [](const Sizes& s, std::mt19937& rng) {  // dy, x, w, add
    return Tensors{random_tensor({s[0], s[1]}, rng), random_tensor({s[0], s[1]}, rng, -2, 2),
                   random_tensor({s[1]}, rng, 0.5f, 1.5f), random_tensor({s[0], s[1]}, rng)};
  };
  ba.run = [](const Tensors& in, Device d, DType dt) {
    Tensor rstd = out_like({in[1].size(0)}, d, DType::F32);
    rmsnorm_out(in[1], in[2], d, dt, &rstd);
    Tensor dx = out_like(in[1].shape(), d, dt), dw = out_like(in[2].shape(), d, DType::F32);
    ops::rmsnorm_backward_add(on(in[0], d, dt), on(in[1], d, dt), on(in[2], d, dt), rstd,
                              on(in[3], d, dt), dx, &dw);
    return Tensors{host_f32(dx), host_f32(dw)};
  };
  // L = Σ dy·rmsnorm(x) + Σ add·x: the norm's input also feeds the residual path.
  ba.backward_of = "rmsnorm";
  ba.loss = [](const Tensors& in, Device d) {
    return dot(rmsnorm_out(in[1], in[2], d, DType::F32), in[0]) + dot(in[1], in[3]);
  };
  ba.grad_of = {1, 2};
  ba.tol_bf16 = 3e-2;
  v.push_back(ba);
  return v;
}

OpCase rope_case() {
  OpCase c{"rope"};
  c.sizes = {{1, 1, 2}, {5, 3, 8}, {33, 4, 64}, {7, 2, 128}};  // tokens, heads, head_dim
  c.make = [](const Sizes& s, std::mt19937& rng) {
    std::vector<float> inv(size_t(s[2] / 2));
    for (size_t i = 0; i < inv.size(); ++i) inv[i] = float(std::pow(10000.0, -2.0 * double(i) / double(s[2])));
    return Tensors{random_tensor({s[0], s[1], s[2]}, rng), random_ids({s[0]}, 512, rng),
                   Tensor::from_vector(inv, {int64_t(inv.size())})};
  };
  c.run = [](const Tensors& in, Device d, DType dt) {
    Tensor x = on(in[0], d, dt), pos = on(in[1], d, dt), inv = on(in[2], d, DType::F32);
    ops::rope(x, pos, inv);
    Tensor back = x.clone();
    ops::rope(back, pos, inv, /*inverse=*/true);  // the backward: rotates x back
    return Tensors{host_f32(x), host_f32(back)};
  };
  return c;
}

std::vector<OpCase> swiglu_cases() {
  const std::vector<Sizes> sizes = {{1, 1}, {3, 50}, {7, 1031}, {4, 11008}};
  OpCase f{"swiglu"};
  f.sizes = sizes;
  f.make = [](const Sizes& s, std::mt19937& rng) {
    return Tensors{random_tensor({s[0], s[1]}, rng, -4, 4), random_tensor({s[0], s[1]}, rng)};
  };
  f.run = [](const Tensors& in, Device d, DType dt) {
    Tensor out = out_like(in[0].shape(), d, dt);
    ops::swiglu(on(in[0], d, dt), on(in[1], d, dt), out);
    return Tensors{host_f32(out)};
  };
  OpCase b{"swiglu_backward"};
  b.sizes = sizes;
  b.make = [](const Sizes& s, std::mt19937& rng) {  // dout, gate, up
    return Tensors{random_tensor({s[0], s[1]}, rng), random_tensor({s[0], s[1]}, rng, -4, 4),
                   random_tensor({s[0], s[1]}, rng)};
  };
  b.run = [](const Tensors& in, Device d, DType dt) {
    Tensor dg = out_like(in[1].shape(), d, dt), du = out_like(in[1].shape(), d, dt);
    ops::swiglu_backward(on(in[0], d, dt), on(in[1], d, dt), on(in[2], d, dt), dg, du);
    return Tensors{host_f32(dg), host_f32(du)};
  };
  b.backward_of = "swiglu";
  b.loss = [](const Tensors& in, Device) { return dot(swiglu_out(in[1], in[2]), in[0]); };
  b.grad_of = {1, 2};
  return {f, b};
}

std::vector<OpCase> embedding_cases() {
  const std::vector<Sizes> sizes = {{5, 3, 1}, {50, 40, 17}, {1000, 64, 300}};  // vocab, dim, tokens
  OpCase f{"embedding"};
  f.sizes = sizes;
  f.make = [](const Sizes& s, std::mt19937& rng) {
    return Tensors{random_tensor({s[0], s[1]}, rng), random_ids({s[2]}, int32_t(s[0]), rng)};
  };
  f.run = [](const Tensors& in, Device d, DType dt) {
    Tensor out = out_like({in[1].size(0), in[0].size(1)}, d, dt);
    ops::embedding(on(in[0], d, dt), on(in[1], d, dt), out);
    return Tensors{host_f32(out)};
  };
  f.tol_bf16 = 0;  // a copy of rows
  OpCase b{"embedding_backward"};
  b.sizes = sizes;
  b.make = [](const Sizes& s, std::mt19937& rng) {  // dout, ids, table
    return Tensors{random_tensor({s[2], s[1]}, rng), random_ids({s[2]}, int32_t(s[0]), rng),
                   random_tensor({s[0], s[1]}, rng)};
  };
  b.run = [](const Tensors& in, Device d, DType dt) {
    Tensor dtable = out_like(in[2].shape(), d, DType::F32);
    ops::embedding_backward(on(in[0], d, dt), on(in[1], d, dt), dtable);
    return Tensors{host_f32(dtable)};
  };
  b.backward_of = "embedding";
  b.loss = [](const Tensors& in, Device) {
    Tensor out = out_like(in[0].shape(), kCpu, DType::F32);
    ops::embedding(in[2], in[1], out);
    return dot(out, in[0]);
  };
  b.grad_of = {2};
  return {f, b};
}

OpCase cross_entropy_case() {
  OpCase c{"cross_entropy"};
  c.sizes = {{1, 2}, {4, 12}, {9, 1000}, {3, 32000}};  // tokens, vocab
  c.make = [](const Sizes& s, std::mt19937& rng) {
    Tensor t = random_ids({s[0]}, int32_t(s[1]), rng);
    if (s[0] > 1) t.ptr<int32_t>()[1] = ops::kIgnoreIndex;
    return Tensors{random_tensor({s[0], s[1]}, rng, -3, 3), t};
  };
  c.run = [](const Tensors& in, Device d, DType dt) {
    Tensor losses = out_like({in[0].size(0)}, d, DType::F32), dl = out_like(in[0].shape(), d, dt);
    ops::cross_entropy(on(in[0], d, dt), on(in[1], d, dt), losses, &dl, 0.25f);
    return Tensors{host_f32(losses), host_f32(dl)};
  };
  // dlogits is its own backward: ∂(0.25·Σ losses)/∂logits.
  c.backward_of = "cross_entropy";
  c.loss = [](const Tensors& in, Device) {
    Tensor losses = out_like({in[0].size(0)}, kCpu, DType::F32);
    ops::cross_entropy(in[0], in[1], losses);
    return 0.25 * dot(losses, Tensor::from_vector(std::vector<float>(size_t(losses.numel()), 1.0f), losses.shape()));
  };
  c.grad_of = {-1, 0};
  c.fd_max_elements = 100;  // the softmax of a large vocabulary leaves each logit too small a share
  return c;
}

}  // namespace

std::vector<OpCase> math_cases() {
  std::vector<OpCase> v{gemm_case()};
  for (auto part : {elementwise_cases(), norm_cases()})
    for (OpCase& c : part) v.push_back(c);
  v.push_back(rope_case());
  for (auto part : {swiglu_cases(), embedding_cases()})
    for (OpCase& c : part) v.push_back(c);
  v.push_back(cross_entropy_case());
  return v;
}

}  // namespace loft::test::parity
