// transpose_codes: validation, the CPU reference, dispatch to the CUDA kernel.
#include "engine/quant/code_transpose.h"

#include "engine/device/profile.h"
#ifdef LOFT_WITH_CUDA
#include "engine/quant/cuda/code_transpose_cuda.h"
#endif

namespace loft::quant {

namespace {

bool byte_codes(DType t) {
  return t == DType::U8 || t == DType::I8 || t == DType::F8_E4M3 || t == DType::F8_E5M2;
}

}  // namespace

void transpose_codes(const Tensor& src, Tensor& dst) {
  prof::OpScope op_scope("transpose_codes");
  LOFT_CHECK(src.dim() == 2 && byte_codes(src.dtype()), "transpose_codes: src ", src.str(),
             " must be 2-D codes of one byte (U8, I8, F8_E4M3, F8_E5M2)");
  LOFT_CHECK(dst.dtype() == src.dtype() && dst.device() == src.device() &&
                 dst.shape() == Shape({src.size(1), src.size(0)}),
             "transpose_codes: dst ", dst.str(), " must be ", shape_str({src.size(1), src.size(0)}),
             " ", dtype_name(src.dtype()), " on ", src.device().str(), " (src ", src.str(), ")");
  const int64_t rows = src.size(0), cols = src.size(1);
  if (rows * cols == 0) return;
  const auto* in = src.ptr<uint8_t>();
  auto* out = dst.ptr<uint8_t>();
  LOFT_CHECK(out + rows * cols <= in || in + rows * cols <= out,
             "transpose_codes: dst ", dst.str(), " overlaps src ", src.str());
  if (src.device().is_cuda()) {
#ifdef LOFT_WITH_CUDA
    return cuda::transpose_codes(src, dst);
#endif
  }
  LOFT_CHECK(src.device().is_cpu(), "transpose_codes: ", src.str(),
             " is on a device this build cannot run on");
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
}

Tensor transpose_codes(const Tensor& src) {
  LOFT_CHECK(src.dim() == 2, "transpose_codes: src ", src.str(), " must be 2-D");
  Tensor dst = Tensor::empty({src.size(1), src.size(0)}, src.dtype(), src.device());
  transpose_codes(src, dst);
  return dst;
}

}  // namespace loft::quant
