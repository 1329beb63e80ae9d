// The fast path of gemm_lowp through cuBLASLt. Row-major C [M,N] = A [M,K] · B [N,K]ᵀ is column-
// major Cᵀ = B·Aᵀ with both operands stored K-major: cuBLASLt's "TN" case (its A = our B,
// transposed; its B = our A), the only layout its FP8 kernels take.
// FP8: fp32 accumulation (FAST_ACCUM off: Hopper's FP8 tensor cores are promoted to full fp32),
// the scales passed as device pointers (A/B_SCALE_POINTER) so no host sync, alpha on the host.
// INT8: int32 accumulation into a scratch tensor (igemm_i32, which HOT's dX GEMM uses as it is),
// then apply_scales.
// An N that is not a multiple of 16 (a LoRA rank of 8: FALQON's O_A and dB products) goes to
// cuBLASLt as it is when C's rows stay 16-byte aligned and it has an algorithm; else it is padded:
// B gets zero-code rows up to the next multiple of 16 and the product's first N columns are
// copied out (gemm_lowp_padded_n). Anything else cuBLASLt cannot take (no FP8 before compute
// capability 8.9, M or K not multiples of 16, operands not 16-byte aligned, no algorithm found)
// returns false and gemm_lowp falls back to decoding both operands to bf16.
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "engine/core/find_or_make.h"
#include "engine/device/cuda_context.h"
#include "engine/quant/cuda/quantize_cuda.h"

namespace loft::quant::cuda {

namespace {

using loft::cuda::cublas_api;

cudaDataType_t lt_type(DType t) {
  switch (t) {
    case DType::F8_E4M3:
      return CUDA_R_8F_E4M3;
    case DType::F8_E5M2:
      return CUDA_R_8F_E5M2;
    case DType::I8:
      return CUDA_R_8I;
    case DType::F32:
      return CUDA_R_32F;
    case DType::BF16:
      return CUDA_R_16BF;
    case DType::I32:
      return CUDA_R_32I;
    default:
      throw Error(cat("gemm_lowp: no cuBLASLt type for dtype ", dtype_name(t)));
  }
}

bool has_fp8(int device) {
  static std::mutex mu;
  static std::map<int, bool> known;
  std::lock_guard lock(mu);
  auto it = known.find(device);
  if (it != known.end()) return it->second;
  int major = 0, minor = 0;
  LOFT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  LOFT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return known[device] = major * 10 + minor >= 89;
}

struct Key {
  int device;
  int64_t m, n, k;
  DType a, b, c;
  auto operator<=>(const Key&) const = default;
};

// Descriptors and the heuristic's algorithm for one Key; `ok` false when cuBLASLt has none.
struct LowpPlan {
  bool ok = false;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t lt_a = nullptr, lt_b = nullptr, lt_c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;

  LowpPlan() = default;
  LowpPlan(const LowpPlan&) = delete;
  LowpPlan& operator=(const LowpPlan&) = delete;
  ~LowpPlan() {
    if (lt_c) cublas_api().cublasLtMatrixLayoutDestroy(lt_c);
    if (lt_b) cublas_api().cublasLtMatrixLayoutDestroy(lt_b);
    if (lt_a) cublas_api().cublasLtMatrixLayoutDestroy(lt_a);
    if (desc) cublas_api().cublasLtMatmulDescDestroy(desc);
  }
};

std::unique_ptr<LowpPlan> make_plan(const Key& key) {
  auto plan = std::make_unique<LowpPlan>();
  const bool int8 = key.a == DType::I8;
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescCreate(
      &plan->desc, int8 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F, int8 ? CUDA_R_32I : CUDA_R_32F));
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t));
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n));
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatrixLayoutCreate(
      &plan->lt_a, lt_type(key.b), uint64_t(key.k), uint64_t(key.n), key.k));
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatrixLayoutCreate(
      &plan->lt_b, lt_type(key.a), uint64_t(key.k), uint64_t(key.m), key.k));
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatrixLayoutCreate(
      &plan->lt_c, lt_type(key.c), uint64_t(key.n), uint64_t(key.m), key.n));
  cublasLtMatmulPreference_t pref = nullptr;
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<void, void (*)(void*)> pref_guard(pref, [](void* p) {
    cublas_api().cublasLtMatmulPreferenceDestroy(static_cast<cublasLtMatmulPreference_t>(p));
  });
  size_t ws_bytes = 0;
  loft::cuda::cublaslt_workspace(key.device, &ws_bytes);
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublas_api().cublasLtMatmulAlgoGetHeuristic(
      loft::cuda::cublaslt_handle(key.device), plan->desc, plan->lt_a, plan->lt_b, plan->lt_c,
      plan->lt_c, pref, 1, &result, &found);
  plan->ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
  plan->algo = result.algo;
  plan->workspace = result.workspaceSize;
  return plan;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// The cached plan for one shape and dtype triple, or nullptr when cuBLASLt has none. Plans live
// for the process; plans_mu serialises lookups and the launches that use the descriptors.
std::mutex plans_mu;
const LowpPlan* find_plan(const Key& key) {
  static std::map<Key, std::unique_ptr<LowpPlan>> plans;
  const LowpPlan& plan = *find_or_make(plans, key, [&] { return make_plan(key); });
  return plan.ok ? &plan : nullptr;
}

bool fits(int64_t m, int64_t n, int64_t k, const void* a, const void* b, const void* c) {
  return m % 16 == 0 && n % 16 == 0 && k % 16 == 0 && aligned16(a) && aligned16(b) && aligned16(c);
}

}  // namespace

bool igemm_i32(const Tensor& a, const Tensor& b, Tensor& acc) {
  const int dev = acc.device().index;
  loft::cuda::set_device(dev);
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
  if (!fits(m, n, k, a.data(), b.data(), acc.data())) return false;
  std::lock_guard lock(plans_mu);
  const LowpPlan* plan = find_plan(Key{dev, m, n, k, DType::I8, DType::I8, DType::I32});
  if (!plan) return false;
  size_t ws_bytes = 0;
  void* ws = loft::cuda::cublaslt_workspace(dev, &ws_bytes);
  const int32_t one = 1, zero = 0;
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmul(
      loft::cuda::cublaslt_handle(dev), plan->desc, &one, b.data(), plan->lt_a, a.data(),
      plan->lt_b, &zero, acc.data(), plan->lt_c, acc.data(), plan->lt_c, &plan->algo, ws,
      plan->workspace, loft::cuda::stream(dev)));
  return true;
}

namespace {

// c = alpha·sa·sb·a·bᵀ + beta·c with b's rows padded by zero codes (+0 in every format) to n16,
// a multiple of 16, and the first n columns of the [m, n16] product copied into c (c copied in
// first when beta is not 0). Why: the fallback decodes both operands to bf16, a[T, in] included:
// at llama3-8b 2×4096 FALQON r = 8 spent 60 ms a step there against 10 at r = 64; the padding
// moves b (n × k codes) and c's n columns instead.
bool gemm_lowp_padded_n(const Tensor& a, const Tensor& sa, const Tensor& b, const Tensor& sb,
                        Tensor& c, float alpha, float beta) {
  const int dev = c.device().index;
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1), n16 = (n + 15) / 16 * 16;
  Tensor bp = Tensor::empty({n16, k}, b.dtype(), b.device());
  bp.slice(0, n).copy_from(b);
  bp.slice(n, n16 - n).zero_();
  Tensor cp = Tensor::empty({m, n16}, c.dtype(), c.device());
  const size_t es = dtype_size(c.dtype());
  const cudaStream_t st = loft::cuda::stream(dev);
  if (beta != 0.0f) {
    cp.zero_();  // the padded columns' beta·C: 0, not uninitialised memory
    LOFT_CUDA_CHECK(cudaMemcpy2DAsync(cp.data(), n16 * es, c.data(), n * es, n * es, size_t(m),
                                      cudaMemcpyDeviceToDevice, st));
  }
  if (!gemm_lowp_fast(a, sa, bp, sb, cp, alpha, beta)) return false;
  LOFT_CUDA_CHECK(cudaMemcpy2DAsync(c.data(), n * es, cp.data(), n16 * es, n * es, size_t(m),
                                    cudaMemcpyDeviceToDevice, st));
  return true;
}

}  // namespace

namespace {

// The FP8 product through cuBLASLt with the operands as they are; false, with nothing launched,
// when cuBLASLt has no algorithm for it or says NOT_SUPPORTED at launch (a kernel that cannot add
// C does so before launching anything).
bool fp8_as_is(const Tensor& a, const Tensor& sa, const Tensor& b, const Tensor& sb, Tensor& c, float alpha,
               float beta) {
  const int dev = c.device().index;
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
  std::lock_guard lock(plans_mu);
  const LowpPlan* plan = find_plan(Key{dev, m, n, k, a.dtype(), b.dtype(), c.dtype()});
  if (!plan) return false;
  size_t ws_bytes = 0;
  void* ws = loft::cuda::cublaslt_workspace(dev, &ws_bytes);
  // cuBLASLt's A is our B: its scale is sb.
  const void* scale_a = sb.data();
  const void* scale_b = sa.data();
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_a, sizeof scale_a));
  LOFT_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_b, sizeof scale_b));
  // beta != 0: C is read in the kernel's epilogue (C and D share c's layout).
  const cublasStatus_t status = cublas_api().cublasLtMatmul(
      loft::cuda::cublaslt_handle(dev), plan->desc, &alpha, b.data(), plan->lt_a, a.data(),
      plan->lt_b, &beta, c.data(), plan->lt_c, c.data(), plan->lt_c, &plan->algo, ws,
      plan->workspace, loft::cuda::stream(dev));
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  LOFT_CUBLAS_CHECK(status);
  return true;
}

}  // namespace

bool gemm_lowp_fast(const Tensor& a, const Tensor& sa, const Tensor& b, const Tensor& sb, Tensor& c,
                    float alpha, float beta) {
  const int dev = c.device().index;
  loft::cuda::set_device(dev);
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
  // What cuBLASLt refuses is refused before any scratch is allocated or copied.
  const bool int8 = a.dtype() == DType::I8;
  if (!int8 && !has_fp8(dev)) return false;
  if (n % 16 != 0) {
    if (m % 16 != 0 || k % 16 != 0 || !aligned16(a.data())) return false;
    // C's rows 16-byte aligned (a rank of 8 in bf16 or fp32): cuBLASLt may take N as it is, which
    // saves the padded path's copies (~6 ms a step over FALQON r = 8's 224 projections at
    // llama3-8b 2 x 4,096); else, or when it has no algorithm, padded (B and C fresh, so aligned).
    const bool as_is = !int8 && n * int64_t(dtype_size(c.dtype())) % 16 == 0 && aligned16(b.data()) &&
                       aligned16(c.data()) && fp8_as_is(a, sa, b, sb, c, alpha, beta);
    return as_is || gemm_lowp_padded_n(a, sa, b, sb, c, alpha, beta);
  }
  if (!fits(m, n, k, a.data(), b.data(), c.data())) return false;
  if (int8) {
    Tensor acc = Tensor::empty({m, n}, DType::I32, c.device());
    if (!igemm_i32(a, b, acc)) return false;
    apply_scales(acc, sa, sb, alpha, beta, c);
    return true;
  }
  return fp8_as_is(a, sa, b, sb, c, alpha, beta);
}

}  // namespace loft::quant::cuda
