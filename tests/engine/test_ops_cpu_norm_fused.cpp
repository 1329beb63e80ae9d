// CPU add_rmsnorm and rmsnorm_backward_add: the fused residual adds must store exactly what the
// separate ops store (axpy then rmsnorm; rmsnorm_backward then axpy), bit for bit, at odd widths
// and row counts. The CPU backend is F32 only; BF16 is covered by the CUDA tests.

#include "engine/ops/ops.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

constexpr float kEps = 1e-5f;

const Shape kShapes[] = {{1, 40}, {3, 40}, {257, 40}, {1, 4100}, {3, 4100}, {257, 173},
                         {2, 3, 173}, {5, 1}};

int64_t rows_of(const Shape& s) { return shape_numel(s) / s.back(); }

TEST(OpsCpuRmsnormFused, AddRmsnormMatchesAxpyThenRmsnorm) {
  std::mt19937 rng(41);
  for (const Shape& s : kShapes)
    for (bool with_rstd : {true, false}) {
      const int64_t d = s.back();
      const Tensor residual = test::random_tensor(s, rng, -2.0f, 2.0f);
      const Tensor x0 = test::random_tensor(s, rng, -2.0f, 2.0f);
      const Tensor w = test::random_tensor({d}, rng, 0.5f, 1.5f);

      Tensor xs = x0.clone(), ys = Tensor::empty(s, DType::F32);
      Tensor rs = Tensor::zeros({rows_of(s)}, DType::F32);
      ops::axpy(1.0f, residual, xs);
      ops::rmsnorm(xs, w, kEps, ys, with_rstd ? &rs : nullptr);

      Tensor xf = x0.clone(), yf = Tensor::empty(s, DType::F32);
      Tensor rf = Tensor::zeros({rows_of(s)}, DType::F32);
      ops::add_rmsnorm(residual, xf, w, kEps, yf, with_rstd ? &rf : nullptr);

      const std::string what = shape_str(s) + (with_rstd ? "" : ", no rstd");
      EXPECT_TRUE(test::same_bytes(xf, xs)) << "x (the residual sum) " << what;
      EXPECT_TRUE(test::same_bytes(yf, ys)) << "y " << what;
      EXPECT_TRUE(test::same_bytes(rf, rs)) << "rstd " << what;
    }
}

// y written over the residual: each row's residual is consumed before its y is written.
TEST(OpsCpuRmsnormFused, AddRmsnormWithYOverResidual) {
  std::mt19937 rng(42);
  const Shape s{7, 173};
  const Tensor residual = test::random_tensor(s, rng), x0 = test::random_tensor(s, rng);
  const Tensor w = test::random_tensor({173}, rng, 0.5f, 1.5f);
  Tensor xs = x0.clone(), ys = Tensor::empty(s, DType::F32);
  ops::axpy(1.0f, residual, xs);
  ops::rmsnorm(xs, w, kEps, ys);
  Tensor xf = x0.clone(), yf = residual.clone();
  ops::add_rmsnorm(yf, xf, w, kEps, yf);
  EXPECT_TRUE(test::same_bytes(xf, xs));
  EXPECT_TRUE(test::same_bytes(yf, ys));
}

TEST(OpsCpuRmsnormFused, BackwardAddMatchesBackwardThenAxpy) {
  std::mt19937 rng(43);
  enum class Out { Fresh, OverAdd, OverDy };
  for (const Shape& s : kShapes)
    for (bool with_dw : {true, false})
      for (Out out : {Out::Fresh, Out::OverAdd, Out::OverDy}) {
        const int64_t d = s.back();
        const Tensor x = test::random_tensor(s, rng, -2.0f, 2.0f);
        const Tensor dy = test::random_tensor(s, rng), add = test::random_tensor(s, rng);
        const Tensor w = test::random_tensor({d}, rng, 0.5f, 1.5f);
        const Tensor dw0 = test::random_tensor({d}, rng);
        Tensor y = Tensor::empty(s, DType::F32), rstd = Tensor::empty({rows_of(s)}, DType::F32);
        ops::rmsnorm(x, w, kEps, y, &rstd);

        Tensor dxs = Tensor::empty(s, DType::F32), dws = dw0.clone();
        ops::rmsnorm_backward(dy, x, w, rstd, dxs, with_dw ? &dws : nullptr);
        ops::axpy(1.0f, add, dxs);

        Tensor dyf = dy.clone(), addf = add.clone(), dwf = dw0.clone();
        Tensor dxf = out == Out::OverAdd ? addf : out == Out::OverDy ? dyf : Tensor::empty(s, DType::F32);
        ops::rmsnorm_backward_add(dyf, x, w, rstd, addf, dxf, with_dw ? &dwf : nullptr);

        const std::string what = shape_str(s) + (with_dw ? ", dweight" : "") +
                                 (out == Out::OverAdd  ? ", dx over add"
                                  : out == Out::OverDy ? ", dx over dy"
                                                       : "");
        EXPECT_TRUE(test::same_bytes(dxf, dxs)) << "dx " << what;
        EXPECT_TRUE(test::same_bytes(dwf, dws)) << "dweight " << what;
      }
}

TEST(OpsCpuRmsnormFused, RejectsMismatchedResidualOperands) {
  const Tensor w = Tensor::zeros({8}, DType::F32);
  Tensor x = Tensor::zeros({3, 8}, DType::F32), y = Tensor::zeros({3, 8}, DType::F32);
  Tensor rstd = Tensor::zeros({3}, DType::F32);
  const Tensor short_rows = Tensor::zeros({2, 8}, DType::F32);
  try {
    ops::add_rmsnorm(short_rows, x, w, kEps, y);
    FAIL() << "add_rmsnorm accepted a [2, 8] residual for a [3, 8] x";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "add_rmsnorm: residual"));
  }
  try {
    ops::rmsnorm_backward_add(x, x, w, rstd, short_rows, y);
    FAIL() << "rmsnorm_backward_add accepted a [2, 8] add for a [3, 8] x";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "rmsnorm_backward_add: add"));
  }
}

}  // namespace
}  // namespace loft
