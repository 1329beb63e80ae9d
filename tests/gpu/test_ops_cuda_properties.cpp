// Properties of the CUDA ops that are not a comparison with the CPU (the parity harness,
// tests/ops/gpu, does those): rmsnorm's optional rstd changes nothing else, and RoPE's inverse
// undoes its forward at large positions.
#include "engine/ops/rope_freq.h"
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

TEST(RmsnormCuda, RstdIsOptional) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(31);
  const Shape shapes[] = {{1, 8}, {7, 172}, {33, 4096}, {2, 3, 172}, {1000, 173}, {3, 1}};
  for (DType xt : kActivationDtypes)
    for (DType wt : kActivationDtypes)
      for (const Shape& s : shapes) {
        const int64_t d = s.back(), rows = shape_numel(s) / d;
        Tensor x = to_gpu(random_tensor(s, rng, -2.0f, 2.0f), xt);
        Tensor w = to_gpu(random_tensor({d}, rng, 0.5f, 1.5f), wt);
        Tensor y = Tensor::empty(s, xt, kGpu), rstd = Tensor::empty({rows}, DType::F32, kGpu);
        ops::rmsnorm(x, w, 1e-5f, y, &rstd);
        Tensor y2 = Tensor::empty(s, xt, kGpu);
        ops::rmsnorm(x, w, 1e-5f, y2);
        EXPECT_EQ(y2.to_float_vector(), y.to_float_vector()) << name(xt) << " x, " << name(wt) << " weight, " << shape_str(s);
      }
}

struct RopeCase {
  int64_t tokens, heads, head_dim;
};
const RopeCase kCases[] = {{1, 1, 8}, {7, 3, 8}, {65, 8, 128}, {9, 1, 128}, {3, 5, 2}};

Tensor inv_freq_for(int64_t head_dim) {
  const std::vector<float> f = rope_inv_freq(int(head_dim), 10000.0, RopeScaling{});
  return Tensor::from_vector(f, {head_dim / 2});
}

TEST(RopeCuda, InverseUndoesForward) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(42);
  for (const RopeCase& c : kCases) {
    const Shape s{c.tokens, c.heads, c.head_dim};
    Tensor x0 = random_tensor(s, rng);
    Tensor pos = random_ids({c.tokens}, 100000, rng).to(kGpu);
    Tensor freq = inv_freq_for(c.head_dim).to(kGpu);
    Tensor x = x0.to(kGpu);
    ops::rope(x, pos, freq, false);
    EXPECT_GT(rel_error(x, x0), 1e-3) << "forward must rotate " << shape_str(s);
    ops::rope(x, pos, freq, true);
    EXPECT_LT(rel_error(x, x0), 1e-5) << shape_str(s);
  }
}

}  // namespace
}  // namespace loft::test
