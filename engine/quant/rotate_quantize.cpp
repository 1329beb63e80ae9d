// rotate_quantize / token_rotate_quantize: the unfused CPU reference and the CUDA dispatch.
#include "engine/quant/rotate_quantize.h"

#include "engine/device/profile.h"
#ifdef LOFT_WITH_CUDA
#include "engine/quant/cuda/hadamard_cuda.h"
#endif

namespace loft::quant {

#ifdef LOFT_WITH_CUDA  // only the CUDA path fills codes in place (a CPU-only build has no caller)
namespace {

QuantizedTensor empty_codes(const Shape& shape, LowpFormat format, Device device) {
  QuantizedTensor q;
  q.format = format;
  q.codes = Tensor::empty(shape, code_dtype(format), device);
  q.scale = Tensor::empty({1}, DType::F32, device);
  return q;
}

}  // namespace
#endif

QuantizedTensor rotate_quantize(const HadamardPlan& plan, const Tensor& x, LowpFormat format) {
  prof::OpScope op_scope("rotate_quantize");
  LOFT_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == plan.n, "rotate_quantize: x ",
             x.defined() ? x.str() : std::string("(undefined)"), " must end in the plan's n=",
             plan.n);
  if (x.device().is_cpu() || x.numel() == 0) {
    Tensor xr = Tensor::empty(x.shape(), x.dtype(), x.device());
    hadamard_transform(plan, x, xr);
    return quantize(xr, format);
  }
#ifdef LOFT_WITH_CUDA
  QuantizedTensor q = empty_codes(x.shape(), format, x.device());
  rotate_quantize_cuda(plan, x, /*token_dim=*/false, q.codes, q.scale);
  return q;
#else
  throw Error(cat("rotate_quantize: x ", x.str(), " is on a GPU but loft was built without CUDA"));
#endif
}

QuantizedTensor token_rotate_quantize(const HadamardPlan& plan, const Tensor& x,
                                      LowpFormat format) {
  prof::OpScope op_scope("token_rotate_quantize");
  LOFT_CHECK(x.defined() && x.dim() == 2 && x.size(0) <= plan.n, "token_rotate_quantize: x ",
             x.defined() ? x.str() : std::string("(undefined)"),
             " must be [tokens, N] with at most the plan's n=", plan.n, " rows");
  const Shape shape{plan.n, x.size(1)};
  if (x.device().is_cpu() || x.numel() == 0) {
    Tensor xr = Tensor::empty(shape, x.dtype(), x.device());
    token_transform(plan, x, xr);
    return quantize(xr, format);
  }
#ifdef LOFT_WITH_CUDA
  QuantizedTensor q = empty_codes(shape, format, x.device());
  rotate_quantize_cuda(plan, x, /*token_dim=*/true, q.codes, q.scale);
  return q;
#else
  throw Error(cat("token_rotate_quantize: x ", x.str(),
                  " is on a GPU but loft was built without CUDA"));
#endif
}

}  // namespace loft::quant
