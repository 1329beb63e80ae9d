// SwiGLU forward/backward against the CPU, including the in-place backward (dgate over gate,
// dup over up) the MLP uses to save memory.
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

const Shape kShapes[] = {{1, 1}, {7, 172}, {33, 1000}, {5, 4099}};

TEST(SwigluCuda, ForwardMatchesCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(51);
  for (DType dt : kActivationDtypes)
    for (const Shape& s : kShapes) {
      Tensor g = to_gpu(random_tensor(s, rng, -6.0f, 6.0f), dt),
             u = to_gpu(random_tensor(s, rng), dt);
      Tensor out = Tensor::empty(s, dt, kGpu), cout = Tensor::empty(s, DType::F32);
      ops::swiglu(cpu_f32(g), cpu_f32(u), cout);
      ops::swiglu(g, u, out);
      EXPECT_LT(rel_error(out, cout), tol(dt)) << name(dt) << " " << shape_str(s);
    }
}

TEST(SwigluCuda, BackwardMatchesCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(52);
  for (DType dt : kActivationDtypes)
    for (const Shape& s : kShapes)
      for (bool in_place : {false, true}) {
        Tensor g = to_gpu(random_tensor(s, rng, -6.0f, 6.0f), dt);
        Tensor u = to_gpu(random_tensor(s, rng), dt), dout = to_gpu(random_tensor(s, rng), dt);
        Tensor cdg = Tensor::empty(s, DType::F32), cdu = Tensor::empty(s, DType::F32);
        ops::swiglu_backward(cpu_f32(dout), cpu_f32(g), cpu_f32(u), cdg, cdu);
        Tensor dg = in_place ? g : Tensor::empty(s, dt, kGpu);
        Tensor du = in_place ? u : Tensor::empty(s, dt, kGpu);
        ops::swiglu_backward(dout, g, u, dg, du);
        const std::string what = name(dt) + " " + shape_str(s) + (in_place ? " in place" : "");
        EXPECT_LT(rel_error(dg, cdg), tol(dt)) << what;
        EXPECT_LT(rel_error(du, cdu), tol(dt)) << what;
      }
}

}  // namespace
}  // namespace loft::test
