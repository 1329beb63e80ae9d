// GEMM through OpenBLAS (row-major cblas_sgemm).
#include <cblas.h>

#include <algorithm>

#include "engine/ops/ops.h"

namespace loft::ops::cpu {

void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmOptions& opt) {
  const int64_t m = c.size(0), n = c.size(1);
  const int64_t k = opt.trans_a ? a.size(0) : a.size(1);
  constexpr int64_t kBlasMax = 0x7fffffff;  // OpenBLAS here takes 32-bit sizes
  LOFT_CHECK(m <= kBlasMax && n <= kBlasMax && k <= kBlasMax,
             "gemm: [", m, ", ", k, "] x [", k, ", ", n, "] exceeds the CPU BLAS size limit");
  if (m == 0 || n == 0) return;
  float* cp = c.ptr<float>();
  // beta == 0 must not read C (0 · NaN = NaN). The BLAS standard promises this too; clearing C
  // here keeps the guarantee independent of the BLAS build and covers the k == 0 path below.
  if (opt.beta == 0.0f) std::fill(cp, cp + c.numel(), 0.0f);
  if (k == 0) {  // op(A)·op(B) is all zeros; C = beta·C
    if (opt.beta != 0.0f && opt.beta != 1.0f)
      for (int64_t i = 0; i < c.numel(); ++i) cp[i] *= opt.beta;
    return;
  }
  // Leading dimension of a row-major [rows, cols] matrix is cols (at least 1 for the BLAS).
  const auto ld = [](const Tensor& t) { return blasint(std::max<int64_t>(t.size(1), 1)); };
  const float* ap = a.ptr<float>();
  const float* bp = b.ptr<float>();
  const auto call = [&](int64_t rows, int64_t kk, const float* a0, const float* b0, float beta, float* c0) {
    cblas_sgemm(CblasRowMajor, opt.trans_a ? CblasTrans : CblasNoTrans,
                opt.trans_b ? CblasTrans : CblasNoTrans, blasint(rows), blasint(n), blasint(kk),
                opt.alpha, a0, ld(a), b0, ld(b), beta, c0, ld(c));
  };
  // A's rows in blocks of kGemmRowBlock (ops.h): without trans_a they are C's rows, computed
  // apart; with it they are the reduction, summed block after block into C. The same product
  // over a tile of rows (at a multiple of the block) then repeats these calls exactly.
  if (!opt.trans_a) {
    for (int64_t r = 0; r < m; r += kGemmRowBlock)
      call(std::min(kGemmRowBlock, m - r), k, ap + r * ld(a), bp, opt.beta, cp + r * ld(c));
    return;
  }
  for (int64_t r = 0; r < k; r += kGemmRowBlock)
    call(m, std::min(kGemmRowBlock, k - r), ap + r * ld(a), bp + (opt.trans_b ? r : r * ld(b)),
         r == 0 ? opt.beta : 1.0f, cp);
}

}  // namespace loft::ops::cpu
