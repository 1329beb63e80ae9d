// CUDA add_rmsnorm and rmsnorm_backward_add: bit-identical to the separate CUDA ops they replace
// (axpy then rmsnorm; rmsnorm_backward then axpy) for every activation × weight dtype, at odd
// widths and row counts, with unaligned operands (scalar paths, and a residual whose alignment
// differs from x's). The parity harness (tests/ops/gpu) compares both with the CPU at these
// shapes and offsets; `loft bench kernels` times both forms.
#include "engine/device/memory.h"
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

constexpr float kEps = 1e-5f;

const Shape kShapes[] = {{1, 40},   {3, 40},      {257, 40}, {1, 4100}, {3, 4100},
                         {257, 4100}, {33, 4096}, {2, 3, 173}, {5, 1}};

int64_t rows_of(const Shape& s) { return shape_numel(s) / s.back(); }

// `src`'s values in a new GPU tensor of dtype dt, starting `offset` elements into its buffer
// (offset 1: no row is 16-byte aligned when the width is a multiple of 8, so kernels take their
// scalar paths).
Tensor placed(const Tensor& src, DType dt, int64_t offset) {
  Tensor flat = Tensor::zeros({src.numel() + offset}, dt, kGpu);
  Tensor out = flat.slice(offset, src.numel()).view(src.shape());
  ops::convert(src, out);
  return out;
}

// The offsets of (x, residual): aligned, both unaligned, and residual alone unaligned (the
// vectorised path must then read the residual element by element).
constexpr std::pair<int64_t, int64_t> kOffsets[] = {{0, 0}, {1, 1}, {0, 1}};

TEST(RmsnormFusedCuda, AddRmsnormMatchesSeparateOps) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(51);
  for (DType xt : kActivationDtypes)
    for (DType wt : kActivationDtypes)
      for (const Shape& s : kShapes)
        for (auto [xoff, roff] : kOffsets) {
          const int64_t d = s.back();
          const Tensor x0 = to_gpu(random_tensor(s, rng, -2.0f, 2.0f), xt);
          const Tensor res = placed(random_tensor(s, rng, -2.0f, 2.0f).to(kGpu), xt, roff);
          const Tensor w = to_gpu(random_tensor({d}, rng, 0.5f, 1.5f), wt);
          const std::string what = name(xt) + " x, " + name(wt) + " weight, " + shape_str(s) +
                                   ", offsets " + std::to_string(xoff) + "/" + std::to_string(roff);

          Tensor xs = placed(x0, xt, xoff), ys = Tensor::empty(s, xt, kGpu);
          Tensor rs = Tensor::empty({rows_of(s)}, DType::F32, kGpu);
          ops::axpy(1.0f, res, xs);
          ops::rmsnorm(xs, w, kEps, ys, &rs);

          Tensor xf = placed(x0, xt, xoff), yf = Tensor::empty(s, xt, kGpu);
          Tensor rf = Tensor::empty({rows_of(s)}, DType::F32, kGpu);
          ops::add_rmsnorm(res, xf, w, kEps, yf, &rf);
          EXPECT_TRUE(same_bytes(xf, xs)) << "x (the residual sum) " << what;
          EXPECT_TRUE(same_bytes(yf, ys)) << "y " << what;
          EXPECT_TRUE(same_bytes(rf, rs)) << "rstd " << what;

          Tensor xn = placed(x0, xt, xoff), yn = Tensor::empty(s, xt, kGpu);  // rstd optional
          ops::add_rmsnorm(res, xn, w, kEps, yn);
          EXPECT_TRUE(same_bytes(yn, ys)) << "y without rstd " << what;
        }
}

TEST(RmsnormFusedCuda, BackwardAddMatchesSeparateOps) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(52);
  enum class Out { Fresh, OverAdd, OverDy };
  for (DType xt : kActivationDtypes)
    for (DType wt : kActivationDtypes)
      for (const Shape& s : kShapes)
        for (auto [xoff, aoff] : kOffsets)
          for (Out out : {Out::Fresh, Out::OverAdd, Out::OverDy}) {
            const bool with_dw = out == Out::Fresh;
            const int64_t d = s.back();
            const Tensor x = placed(random_tensor(s, rng, -2.0f, 2.0f).to(kGpu), xt, xoff);
            const Tensor dy0 = placed(random_tensor(s, rng).to(kGpu), xt, xoff);
            const Tensor add0 = placed(random_tensor(s, rng).to(kGpu), xt, aoff);
            const Tensor w = to_gpu(random_tensor({d}, rng, 0.5f, 1.5f), wt);
            const Tensor dw0 = random_tensor({d}, rng).to(kGpu);
            Tensor y = Tensor::empty(s, xt, kGpu), rstd = Tensor::empty({rows_of(s)}, DType::F32, kGpu);
            ops::rmsnorm(x, w, kEps, y, &rstd);
            const std::string what = name(xt) + " x, " + name(wt) + " weight, " + shape_str(s) +
                                     ", offsets " + std::to_string(xoff) + "/" + std::to_string(aoff) +
                                     (out == Out::OverAdd  ? ", dx over add"
                                      : out == Out::OverDy ? ", dx over dy"
                                                           : ", dweight");

            // The separate dx sits where the fused one does: the kernel's vectorisation (and so
            // its summation order) depends on dx's alignment too.
            Tensor dxs = placed(dy0, xt, out == Out::OverAdd ? aoff : xoff), dws = dw0.clone();
            ops::rmsnorm_backward(dy0, x, w, rstd, dxs, with_dw ? &dws : nullptr);
            ops::axpy(1.0f, add0, dxs);

            Tensor dy = placed(dy0, xt, xoff), add = placed(add0, xt, aoff), dwf = dw0.clone();
            Tensor dx = out == Out::OverAdd ? add : out == Out::OverDy ? dy : placed(dy0, xt, xoff);
            ops::rmsnorm_backward_add(dy, x, w, rstd, add, dx, with_dw ? &dwf : nullptr);
            EXPECT_TRUE(same_bytes(dx, dxs)) << "dx " << what;
            // dweight is summed over rows with one atomicAdd per column tile (rmsnorm.cu): its
            // order, and so its last bits, vary between any two calls, fused or not.
            EXPECT_LT(rel_error(dwf, dws), 1e-6) << "dweight " << what;
          }
}

}  // namespace
}  // namespace loft::test
