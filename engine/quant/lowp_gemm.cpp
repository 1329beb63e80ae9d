// gemm_lowp: validation, the fast-path dispatch, and the portable decode + GEMM path.
#include "engine/quant/lowp_gemm.h"

#include "engine/device/profile.h"
#include "engine/ops/ops.h"
#include "engine/quant/quantize.h"
#ifdef LOFT_WITH_CUDA
#include "engine/quant/cuda/quantize_cuda.h"
#endif

namespace loft::quant {

namespace {

void validate(const Tensor& a, const Tensor& sa, const Tensor& b, const Tensor& sb,
              const Tensor& c) {
  const LowpFormat fa = format_of(a.dtype(), "gemm_lowp: A"), fb = format_of(b.dtype(), "gemm_lowp: B");
  LOFT_CHECK((fa == LowpFormat::INT8) == (fb == LowpFormat::INT8) &&
                 !(fa == LowpFormat::E5M2 && fb == LowpFormat::E5M2),
             "gemm_lowp: unsupported format pair ", format_name(fa), " x ", format_name(fb),
             " (E4M3/E5M2 pairs other than E5M2xE5M2, or INT8xINT8)");
  LOFT_CHECK(a.dim() == 2 && b.dim() == 2 && c.dim() == 2, "gemm_lowp: A ", a.str(), ", B ",
             b.str(), " and C ", c.str(), " must be 2-D");
  LOFT_CHECK(a.size(1) == b.size(1), "gemm_lowp: A ", a.str(), " and B ", b.str(),
             " must share K (C = A·Bᵀ)");
  LOFT_CHECK(c.size(0) == a.size(0) && c.size(1) == b.size(0), "gemm_lowp: C ", c.str(),
             " must be [", a.size(0), ", ", b.size(0), "]");
  LOFT_CHECK(c.dtype() == DType::F32 || (c.dtype() == DType::BF16 && c.device().is_cuda()),
             "gemm_lowp: C must be F32 (or BF16 on CUDA), got ", c.str());
  for (const Tensor* t : {&b, &sa, &sb})
    LOFT_CHECK(t->device() == a.device() && c.device() == a.device(),
               "gemm_lowp: all tensors must be on one device (A on ", a.device().str(), ", ",
               t->str(), ", C ", c.str(), ")");
  for (const Tensor* s : {&sa, &sb})
    LOFT_CHECK(s->dtype() == DType::F32 && s->numel() == 1,
               "gemm_lowp: scales must be F32 with one element, got ", s->str());
}

// acc = decode(a)·decode(b)ᵀ in `dt` operands with fp32 accumulation (exact products).
Tensor decoded_product(const Tensor& a, const Tensor& b, DType dt) {
  Tensor da = Tensor::empty(a.shape(), dt, a.device());
  Tensor db = Tensor::empty(b.shape(), dt, b.device());
  dequantize(a, nullptr, da);
  dequantize(b, nullptr, db);
  Tensor acc = Tensor::empty({a.size(0), b.size(0)}, DType::F32, a.device());
  ops::GemmOptions g;
  g.trans_b = true;
  ops::gemm(da, db, acc, g);
  return acc;
}

}  // namespace

void gemm_lowp(const Tensor& a, const Tensor& sa, const Tensor& b, const Tensor& sb, Tensor& c,
               const LowpGemmOptions& opt) {
  validate(a, sa, b, sb, c);
  if (c.numel() == 0) return;
  // Named by shape and code types in the profiler's op breakdown, as ops::gemm is.
  prof::OpScope shaped(prof::label([&] {
    return cat("gemm_lowp ", c.size(0), "x", c.size(1), "x", a.size(1), " ", dtype_name(a.dtype()), "x",
               dtype_name(b.dtype()), opt.beta != 0.0f ? " +C" : "");
  }));
  if (a.device().is_cpu()) {
    const Tensor acc = decoded_product(a, b, DType::F32);
    const float f = opt.alpha * *sa.ptr<float>() * *sb.ptr<float>();
    const float* in = acc.ptr<float>();
    float* out = c.ptr<float>();
    for (int64_t i = 0; i < c.numel(); ++i)
      out[i] = opt.beta == 0.0f ? in[i] * f : in[i] * f + opt.beta * out[i];
    return;
  }
#ifdef LOFT_WITH_CUDA
  if (opt.allow_fast && a.size(1) > 0 &&
      cuda::gemm_lowp_fast(a, sa, b, sb, c, opt.alpha, opt.beta))
    return;
  const Tensor acc = decoded_product(a, b, DType::BF16);
  cuda::apply_scales(acc, sa, sb, opt.alpha, opt.beta, c);
#else
  throw Error(cat("gemm_lowp: ", a.str(), " is on a device this build cannot run on"));
#endif
}

}  // namespace loft::quant
