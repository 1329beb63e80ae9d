// RoPE against the CPU for head_dim 8 and 128, several head counts and large positions; the
// inverse rotation against the CPU and as an exact undo of the forward.
#include "engine/ops/rope_freq.h"
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

struct RopeCase {
  int64_t tokens, heads, head_dim;
};
const RopeCase kCases[] = {{1, 1, 8}, {7, 3, 8}, {65, 8, 128}, {9, 1, 128}, {3, 5, 2}};

Tensor inv_freq_for(int64_t head_dim) {
  const std::vector<float> f = rope_inv_freq(int(head_dim), 10000.0, RopeScaling{});
  return Tensor::from_vector(f, {head_dim / 2});
}

TEST(RopeCuda, ForwardAndInverseMatchCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(41);
  for (DType dt : kActivationDtypes)
    for (const RopeCase& c : kCases)
      for (bool inverse : {false, true}) {
        const Shape s{c.tokens, c.heads, c.head_dim};
        Tensor x = to_gpu(random_tensor(s, rng), dt);
        Tensor pos = random_ids({c.tokens}, 4096, rng);
        Tensor freq = inv_freq_for(c.head_dim);
        Tensor cx = cpu_f32(x);
        ops::rope(cx, pos, freq, inverse);
        ops::rope(x, pos.to(kGpu), freq.to(kGpu), inverse);
        EXPECT_LT(rel_error(x, cx), tol(dt))
            << name(dt) << " " << shape_str(s) << (inverse ? " inverse" : "");
      }
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
