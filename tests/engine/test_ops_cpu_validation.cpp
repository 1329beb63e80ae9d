// Calls that ops.cpp must reject before they reach the CPU backend: wrong dtypes (the CPU is
// F32-only), mismatched shapes, bad index dtypes.
#include "engine/ops/ops.h"
#include "tests/engine/test_ops_cpu_util.h"

namespace loft {
namespace {

Tensor f32(Shape s) { return Tensor::zeros(std::move(s), DType::F32); }

// Expects an Error whose message contains `needle`.
template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error (expected one mentioning '" << needle << "')";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(OpsCpuValidation, RejectsNonF32ActivationsOnCpu) {
  Tensor xb = Tensor::zeros({2, 8}, DType::BF16), w = f32({8}), y = f32({2, 8});
  expect_error([&] { ops::rmsnorm(xb, w, 1e-5f, y); }, "BF16");
  Tensor a = f32({2, 3}), bb = Tensor::zeros({3, 4}, DType::BF16), c = f32({2, 4});
  expect_error([&] { ops::gemm(a, bb, c); }, "gemm");
  Tensor g = f32({2, 5}), u = Tensor::zeros({2, 5}, DType::F16), out = f32({2, 5});
  expect_error([&] { ops::swiglu(g, u, out); }, "dtype F16");
}

TEST(OpsCpuValidation, RejectsShapeMismatches) {
  Tensor a = f32({4, 3}), b = f32({5, 2}), c = f32({4, 2});
  expect_error([&] { ops::gemm(a, b, c); }, "inner dimensions");
  Tensor b2 = f32({3, 2}), c_bad = f32({2, 4});
  expect_error([&] { ops::gemm(a, b2, c_bad); }, "C is [2, 4]");
  Tensor x = f32({2, 8}), w = f32({7}), y = f32({2, 8}), rstd = f32({3});
  expect_error([&] { ops::rmsnorm(x, w, 1e-5f, y); }, "weight is [7]");
  Tensor w8 = f32({8});
  expect_error([&] { ops::rmsnorm(x, w8, 1e-5f, y, &rstd); }, "rstd is [3]");
  Tensor logits = f32({3, 10}), losses = f32({2});
  Tensor tg = Tensor::zeros({3}, DType::I32);
  expect_error([&] { ops::cross_entropy(logits, tg, losses); }, "losses is [2]");
  Tensor table = f32({10, 4}), ids = Tensor::zeros({5}, DType::I32), out = f32({5, 3});
  expect_error([&] { ops::embedding(table, ids, out); }, "out is [5, 3]");
}

TEST(OpsCpuValidation, RejectsBadRopeArguments) {
  Tensor x = f32({2, 1, 6}), pos = Tensor::zeros({2}, DType::I32), freq = f32({3});
  Tensor pos_f = f32({2});
  expect_error([&] { ops::rope(x, pos_f, freq); }, "positions has dtype F32");
  Tensor odd = f32({2, 1, 5}), freq2 = f32({2});
  expect_error([&] { ops::rope(odd, pos, freq2); }, "odd");
  Tensor freq4 = f32({4});
  expect_error([&] { ops::rope(x, pos, freq4); }, "inv_freq is [4]");
  Tensor x2 = f32({2, 6});
  expect_error([&] { ops::rope(x2, pos, freq); }, "[tokens, heads, head_dim]");
}

TEST(OpsCpuValidation, RejectsBadIndexDtypes) {
  Tensor table = f32({10, 4}), out = f32({5, 4});
  Tensor ids64 = Tensor::zeros({5}, DType::I64);
  expect_error([&] { ops::embedding(table, ids64, out); }, "ids has dtype I64");
  Tensor logits = f32({5, 10}), losses = f32({5}), tf = f32({5});
  expect_error([&] { ops::cross_entropy(logits, tf, losses); }, "targets has dtype F32");
}

}  // namespace
}  // namespace loft
