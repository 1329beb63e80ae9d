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
  const blasint lda = ld(a), ldb = ld(b), ldc = ld(c);
  // Every product in blocks of kGemmRowBlock (ops.h) along M, N and K, the K blocks summed in
  // order into C: whatever the BLAS does inside a call, a product split at a multiple of the block
  // along any dimension (LlamaModel's token tiles: tokens are M, N or K depending on the product)
  // then repeats these calls exactly, on the same data.
  for (int64_t m0 = 0; m0 < m; m0 += kGemmRowBlock)
    for (int64_t n0 = 0; n0 < n; n0 += kGemmRowBlock)
      for (int64_t k0 = 0; k0 < k; k0 += kGemmRowBlock) {
        const int64_t mb = std::min(kGemmRowBlock, m - m0), nb = std::min(kGemmRowBlock, n - n0),
                      kb = std::min(kGemmRowBlock, k - k0);
        // op(A)[m0.., k0..] and op(B)[k0.., n0..] in the stored row-major matrices.
        const float* a0 = opt.trans_a ? ap + k0 * lda + m0 : ap + m0 * lda + k0;
        const float* b0 = opt.trans_b ? bp + n0 * ldb + k0 : bp + k0 * ldb + n0;
        cblas_sgemm(CblasRowMajor, opt.trans_a ? CblasTrans : CblasNoTrans,
                    opt.trans_b ? CblasTrans : CblasNoTrans, blasint(mb), blasint(nb), blasint(kb),
                    opt.alpha, a0, lda, b0, ldb, k0 == 0 ? opt.beta : 1.0f, cp + m0 * ldc + n0, ldc);
      }
}

}  // namespace loft::ops::cpu
