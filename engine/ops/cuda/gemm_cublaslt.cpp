// GEMM through cuBLASLt. loft tensors are row-major; cuBLASLt is column-major, where the memory
// of a row-major [r, c] matrix reads as its transpose. So row-major C = op(A)·op(B) is computed
// as column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: cuBLASLt's "A" is our B, its "B" is our A, same flags.
// Descriptors and the heuristic's algorithm are cached per (device, shape, dtypes, transposes,
// pointer alignments), so the step loop never re-queries the heuristic.
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "engine/core/find_or_make.h"
#include "engine/device/cuda_context.h"
#include "engine/ops/ops.h"

namespace loft::ops {

namespace {

using loft::cuda::cublas_api;

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::BF16:
      return CUDA_R_16BF;
    default:
      throw Error(cat("gemm: no cuBLASLt type for dtype ", dtype_name(t)));
  }
}

// Largest power of two (<= 256) dividing the address: cuBLASLt's heuristic assumes 256-byte
// aligned operands unless told otherwise, and views (row slices) often are not.
uint32_t alignment(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && addr % a != 0) a >>= 1;
  return a;
}

struct PlanKey {
  int device;
  int64_t m, n, k;
  DType ab, c;
  bool trans_a, trans_b;
  uint32_t align_a, align_b, align_c;
  auto operator<=>(const PlanKey&) const = default;
};

// Everything cublasLtMatmul needs besides pointers and scalars.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t lt_a = nullptr, lt_b = nullptr, lt_c = nullptr;  // cuBLASLt's A, B, C
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {  // destroy errors cannot be reported from a destructor; the handles are host memory
    if (lt_c) cublas_api().cublasLtMatrixLayoutDestroy(lt_c);
    if (lt_b) cublas_api().cublasLtMatrixLayoutDestroy(lt_b);
    if (lt_a) cublas_api().cublasLtMatrixLayoutDestroy(lt_a);
    if (desc) cublas_api().cublasLtMatmulDescDestroy(desc);
  }
};

std::string shape_text(const PlanKey& k) {
  return cat("M=", k.m, " N=", k.n, " K=", k.k, " ", dtype_name(k.ab), "x", dtype_name(k.ab), "->",
             dtype_name(k.c), " trans_a=", k.trans_a, " trans_b=", k.trans_b, " (alignments ",
             k.align_a, "/", k.align_b, "/", k.align_c, " bytes)");
}

std::unique_ptr<Plan> make_plan(const PlanKey& key, const Tensor& a, const Tensor& b) {
  auto plan = std::make_unique<Plan>();
  LOFT_CUBLAS_CHECK(
      cublas_api().cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // cuBLASLt's op(A) is op(our B)ᵀ: transposed exactly when our B is.
  const cublasOperation_t op_a = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  // Stored matrices in column-major terms: row-major [r, c] is c rows × r columns, ld = c.
  const cudaDataType_t ab = cuda_type(key.ab), c = cuda_type(key.c);
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatrixLayoutCreate(&plan->lt_a, ab, uint64_t(b.size(1)),
                                                            uint64_t(b.size(0)), b.size(1)));
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatrixLayoutCreate(&plan->lt_b, ab, uint64_t(a.size(1)),
                                                            uint64_t(a.size(0)), a.size(1)));
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatrixLayoutCreate(&plan->lt_c, c, uint64_t(key.n),
                                                            uint64_t(key.m), key.n));

  cublasLtMatmulPreference_t pref = nullptr;
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<void, void (*)(void*)> pref_guard(pref, [](void* p) {
    cublas_api().cublasLtMatmulPreferenceDestroy(static_cast<cublasLtMatmulPreference_t>(p));
  });
  size_t ws_bytes = 0;
  loft::cuda::cublaslt_workspace(key.device, &ws_bytes);
  const uint32_t align_lt_a = key.align_b, align_lt_b = key.align_a, align_c = key.align_c;
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_lt_a, sizeof align_lt_a));
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_lt_b, sizeof align_lt_b));
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c));
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublas_api().cublasLtMatmulAlgoGetHeuristic(
      loft::cuda::cublaslt_handle(key.device), plan->desc, plan->lt_a, plan->lt_b, plan->lt_c,
      plan->lt_c, pref, 1, &result, &found);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    throw Error(cat("gemm: cuBLASLt found no algorithm for ", shape_text(key), ": ",
                    cublas_api().cublasGetStatusName(st)));
  plan->algo = result.algo;
  plan->workspace = result.workspaceSize;
  return plan;
}

const Plan& plan_for(const PlanKey& key, const Tensor& a, const Tensor& b) {
  static std::mutex mu;
  static std::map<PlanKey, std::unique_ptr<Plan>> plans;
  std::lock_guard lock(mu);
  return *find_or_make(plans, key, [&] { return make_plan(key, a, b); });
}

}  // namespace

void cuda::gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmOptions& opt) {
  const int dev = c.device().index;
  loft::cuda::set_device(dev);
  const int64_t m = c.size(0), n = c.size(1);
  const int64_t k = opt.trans_a ? a.size(0) : a.size(1);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // empty sum: C = beta·C, without reading C when beta is 0
    opt.beta == 0.0f ? c.zero_() : scale(c, opt.beta);
    return;
  }
  const PlanKey key{dev, m, n, k, a.dtype(), c.dtype(), opt.trans_a, opt.trans_b,
                    alignment(a.data()), alignment(b.data()), alignment(c.data())};
  const Plan& plan = plan_for(key, a, b);
  size_t ws_bytes = 0;
  void* ws = loft::cuda::cublaslt_workspace(dev, &ws_bytes);
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmul(
      loft::cuda::cublaslt_handle(dev), plan.desc, &opt.alpha, b.data(), plan.lt_a, a.data(),
      plan.lt_b, &opt.beta, c.data(), plan.lt_c, c.data(), plan.lt_c, &plan.algo, ws,
      plan.workspace, loft::cuda::stream(dev)));
}

}  // namespace loft::ops
