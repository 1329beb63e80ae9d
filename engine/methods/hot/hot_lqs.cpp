// LQS: both candidate quantizers on one calibration batch, and their squared errors.
#include "engine/methods/hot/hot_lqs.h"

#include "engine/methods/hot/hot_numerics.h"
#ifdef LOFT_WITH_CUDA
#include "engine/methods/hot/cuda/hot_cuda.h"
#endif

namespace loft::quant {

double hot_squared_error(const Tensor& z, const HotCodes& codes) {
  LOFT_CHECK(z.dtype() == DType::F32 && z.dim() == 2 && z.size(0) == codes.rows &&
                 z.size(1) == codes.cols && codes.codes.defined() && z.device() == codes.device(),
             "hot_squared_error: z ", z.str(), " must be F32 [", codes.rows, ", ", codes.cols,
             "] on the codes' device");
  if (!z.device().is_cpu()) {
#ifdef LOFT_WITH_CUDA
    return cuda::hot_squared_error(z, codes.codes, codes.scale);
#else
    throw Error(cat("hot_squared_error: z ", z.str(), " is on a GPU but loft was built without CUDA"));
#endif
  }
  const int64_t rows = z.size(0), cols = z.size(1), kp = codes.k_padded();
  const float* zp = z.ptr<float>();
  const int8_t* c = codes.codes.ptr<int8_t>();
  const float* s = codes.scale.ptr<float>();
  double sum = 0.0;
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t o = 0; o < cols; ++o) {
      const double d = double(zp[t * cols + o]) - double(hot::mul_rn(float(c[t * kp + o]), s[t]));
      sum += d * d;
    }
  return sum;
}

void hot_lqs_accumulate(const Tensor& dy, const HotQuantOptions& opt, HotLqsErrors& errors) {
  const Tensor z = hot_rotate_rows(dy);
  HotQuantOptions o = opt;
  o.scale = HotScale::PerToken;
  errors.token += hot_squared_error(z, hot_quantize_dy(dy, o));
  o.scale = HotScale::PerTensor;
  errors.tensor += hot_squared_error(z, hot_quantize_dy(dy, o));
  ++errors.batches;
}

}  // namespace loft::quant
