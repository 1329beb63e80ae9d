// NF4 -> FP8/INT8 codes: the exact amax, the CPU reference, and the CUDA dispatch.
#include "engine/quant/nf4_lowp.h"

#include <algorithm>
#include <cmath>

#include "engine/device/profile.h"
#ifdef LOFT_WITH_CUDA
#include "engine/quant/cuda/nf4_cuda.h"
#endif

namespace loft::quant {

float nf4_max_abs(const Nf4Tensor& q) {
  if (q.device().is_cuda()) {
    check_nf4(q, "nf4_max_abs");
#ifdef LOFT_WITH_CUDA
    return nf4_max_abs_cuda(q);  // the codes stay there: a 70B model's are 35 GB
#else
    throw Error("nf4_max_abs: built without CUDA");
#endif
  }
  const std::vector<float> absmax = nf4_block_absmax(q);  // validates q
  const Tensor codes = q.codes.to(Device::cpu());
  const uint8_t* c = codes.ptr<uint8_t>();
  const int64_t n = q.numel();
  float amax = 0.0f;
  for (size_t b = 0; b < absmax.size(); ++b) {
    float level = 0.0f;
    const int64_t lo = int64_t(b) * kNf4BlockSize, hi = std::min(n, lo + kNf4BlockSize);
    for (int64_t i = lo; i < hi; ++i) {
      const int code = (i % 2 == 0) ? (c[i / 2] >> 4) : (c[i / 2] & 15);
      level = std::fmax(level, std::fabs(kNf4Levels[size_t(code)]));
    }
    amax = std::fmax(amax, std::fabs(level * absmax[b]));
  }
  return amax;
}

float nf4_lowp_scale(const Nf4Tensor& q, LowpFormat f) { return scale_for_amax(nf4_max_abs(q), f); }

void nf4_to_lowp(const Nf4Tensor& q, float scale, bool transposed, Tensor& codes) {
  prof::OpScope op_scope("nf4_to_lowp");
  const LowpFormat f = format_of(codes.dtype(), "nf4_to_lowp: codes");
  LOFT_CHECK(q.shape.size() == 2, "nf4_to_lowp: the NF4 weight must be 2-D, got ",
             shape_str(q.shape));
  const int64_t rows = q.shape[0], cols = q.shape[1];
  const Shape want = transposed ? Shape{cols, rows} : Shape{rows, cols};
  LOFT_CHECK(codes.shape() == want && codes.device() == q.device(), "nf4_to_lowp: codes ",
             codes.str(), " must be ", shape_str(want), " on ", q.device().str());
  LOFT_CHECK(std::isfinite(scale) && scale > 0.0f, "nf4_to_lowp: scale ", scale,
             " must be positive and finite");
  if (q.device().is_cuda()) {
#ifdef LOFT_WITH_CUDA
    return nf4_to_lowp_cuda(q, scale, transposed, codes);
#else
    throw Error("nf4_to_lowp: built without CUDA");
#endif
  }
  const Tensor deq = dequantize_nf4(q, DType::F32);
  uint8_t* out = codes.ptr<uint8_t>();
  if (!transposed) return encode_cpu(f, deq.ptr<float>(), deq.numel(), scale, out);
  std::vector<uint8_t> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    encode_cpu(f, deq.ptr<float>() + r * cols, cols, scale, row.data());
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = row[size_t(c)];
  }
}

}  // namespace loft::quant
