// Validation, the CPU reference quantizer, and dispatch to the CUDA kernels.
#include "engine/quant/quantize.h"

#include <array>
#include <cmath>

#include "engine/core/max_abs.h"
#include "engine/device/profile.h"
#include "engine/quant/code_transpose.h"
#include "engine/quant/fp8.h"
#include "engine/quant/int8.h"
#ifdef LOFT_WITH_CUDA
#include "engine/quant/cuda/quantize_cuda.h"
#endif

namespace loft::quant {

float qmax(LowpFormat f) {
  switch (f) {
    case LowpFormat::E4M3:
      return 448.0f;
    case LowpFormat::E5M2:
      return 57344.0f;
    case LowpFormat::INT8:
      return 127.0f;
  }
  throw Error("qmax: unknown low-precision format");
}

DType code_dtype(LowpFormat f) {
  switch (f) {
    case LowpFormat::E4M3:
      return DType::F8_E4M3;
    case LowpFormat::E5M2:
      return DType::F8_E5M2;
    case LowpFormat::INT8:
      return DType::I8;
  }
  throw Error("code_dtype: unknown low-precision format");
}

std::string_view format_name(LowpFormat f) {
  switch (f) {
    case LowpFormat::E4M3:
      return "e4m3";
    case LowpFormat::E5M2:
      return "e5m2";
    case LowpFormat::INT8:
      return "int8";
  }
  return "?";
}

LowpFormat format_of(DType t, std::string_view what) {
  switch (t) {
    case DType::F8_E4M3:
      return LowpFormat::E4M3;
    case DType::F8_E5M2:
      return LowpFormat::E5M2;
    case DType::I8:
      return LowpFormat::INT8;
    default:
      throw Error(cat(what, ": dtype ", dtype_name(t), " is not a quantized code type (F8_E4M3, ",
                      "F8_E5M2 or I8)"));
  }
}

namespace {

void check_scale(const Tensor& scale, const Tensor& codes, std::string_view op) {
  LOFT_CHECK(scale.dtype() == DType::F32 && scale.numel() == 1, op, ": scale must be F32 with one ",
             "element, got ", scale.str());
  LOFT_CHECK(scale.device() == codes.device(), op, ": scale on ", scale.device().str(),
             " but codes on ", codes.device().str());
}

void quantize_cpu(const Tensor& x, Tensor& codes, Tensor* codes_t, Tensor& scale,
                  const Tensor* given_amax) {
  const LowpFormat f = format_of(codes.dtype(), "quantize");
  const std::vector<float> xf = x.to_float_vector();  // exact for F32 and BF16
  const int64_t n = x.numel();
  const float amax = given_amax ? *given_amax->ptr<float>() : max_abs(xf.data(), n);  // NaN skipped
  const float s = scale_for_amax(amax, f);
  auto* out = codes.ptr<uint8_t>();
  encode_cpu(f, xf.data(), n, s, out);
  *scale.ptr<float>() = s;
  if (codes_t) transpose_codes(codes, *codes_t);
}

float decode_cpu(LowpFormat f, uint8_t code) {
  switch (f) {
    case LowpFormat::E4M3:
      return fp8_e4m3_to_f32(code);
    case LowpFormat::E5M2:
      return fp8_e5m2_to_f32(code);
    case LowpFormat::INT8:
      return float(int8_t(code));
  }
  return NAN;
}

void dequantize_cpu(const Tensor& codes, const Tensor* scale, Tensor& out) {
  const std::array<float, 256>& value = code_values(format_of(codes.dtype(), "dequantize"));
  const float s = scale ? *scale->ptr<float>() : 1.0f;
  const auto* in = codes.ptr<uint8_t>();
  const int64_t n = codes.numel();
  if (out.dtype() == DType::F32) {
    float* o = out.ptr<float>();
    for (int64_t i = 0; i < n; ++i) o[i] = value[in[i]] * s;
  } else {
    auto* o = out.ptr<uint16_t>();
    for (int64_t i = 0; i < n; ++i) o[i] = f32_to_bf16(value[in[i]] * s);
  }
}

}  // namespace

const std::array<float, 256>& code_values(LowpFormat f) {
  static const auto tables = [] {
    std::array<std::array<float, 256>, 3> t{};
    for (LowpFormat g : {LowpFormat::E4M3, LowpFormat::E5M2, LowpFormat::INT8})
      for (int c = 0; c < 256; ++c) t[size_t(g)][size_t(c)] = decode_cpu(g, uint8_t(c));
    return t;
  }();
  return tables[size_t(f)];
}

float scale_for_amax(float amax, LowpFormat f) { return amax == 0.0f ? 1.0f : amax / qmax(f); }

void encode_cpu(LowpFormat f, const float* x, int64_t n, float s, uint8_t* codes) {
  switch (f) {
    case LowpFormat::E4M3:
      for (int64_t i = 0; i < n; ++i) codes[i] = f32_to_fp8_e4m3(x[i] / s);
      return;
    case LowpFormat::E5M2:
      for (int64_t i = 0; i < n; ++i) codes[i] = f32_to_fp8_e5m2(x[i] / s);
      return;
    case LowpFormat::INT8:
      for (int64_t i = 0; i < n; ++i) codes[i] = uint8_t(f32_to_int8(x[i] / s));
      return;
  }
}

void quantize_into(const Tensor& x, Tensor& codes, Tensor* codes_t, Tensor& scale,
                   const Tensor* amax) {
  // Named by shape, code type and what it skips or adds, as the GEMMs are (FALQON's 18 a layer).
  prof::OpScope op_scope(prof::label([&] {
    return cat("quantize ", shape_str(x.shape()), " ", dtype_name(codes.dtype()), codes_t ? " +t" : "",
               amax ? " amax given" : "");
  }));
  LOFT_CHECK(x.dtype() == DType::F32 || x.dtype() == DType::BF16,
             "quantize: input must be F32 or BF16, got ", x.str());
  format_of(codes.dtype(), "quantize: codes");
  LOFT_CHECK(codes.shape() == x.shape() && codes.device() == x.device(), "quantize: codes ",
             codes.str(), " do not match the input ", x.str());
  check_scale(scale, x, "quantize");
  if (codes_t) {
    LOFT_CHECK(x.dim() == 2, "quantize: a transposed copy needs a 2-D input, got ", x.str());
    LOFT_CHECK(codes_t->dtype() == codes.dtype() && codes_t->device() == x.device() &&
                   codes_t->shape() == Shape({x.size(1), x.size(0)}),
               "quantize: transposed codes ", codes_t->str(), " do not match the input ", x.str());
  }
  if (amax)
    LOFT_CHECK(amax->dtype() == DType::F32 && amax->numel() == 1 && amax->device() == x.device(),
               "quantize: amax must be F32 [1] on the input's device, got ", amax->str());
  if (x.device().is_cpu()) return quantize_cpu(x, codes, codes_t, scale, amax);
#ifdef LOFT_WITH_CUDA
  cuda::quantize(x, codes, codes_t, scale, amax);
#else
  throw Error(cat("quantize: ", x.str(), " is on a device this build cannot run on"));
#endif
}

QuantizedTensor quantize(const Tensor& x, LowpFormat format, bool also_transposed,
                         const Tensor* amax) {
  QuantizedTensor q;
  q.format = format;
  q.codes = Tensor::empty(x.shape(), code_dtype(format), x.device());
  q.scale = Tensor::empty({1}, DType::F32, x.device());
  if (also_transposed) {
    LOFT_CHECK(x.dim() == 2, "quantize: a transposed copy needs a 2-D input, got ", x.str());
    q.codes_t = Tensor::empty({x.size(1), x.size(0)}, code_dtype(format), x.device());
  }
  quantize_into(x, q.codes, also_transposed ? &q.codes_t : nullptr, q.scale, amax);
  return q;
}

void dequantize(const Tensor& codes, const Tensor* scale, Tensor& out) {
  prof::OpScope op_scope("dequantize");
  format_of(codes.dtype(), "dequantize: codes");
  if (scale) check_scale(*scale, codes, "dequantize");
  LOFT_CHECK(out.dtype() == DType::F32 || out.dtype() == DType::BF16,
             "dequantize: output must be F32 or BF16, got ", out.str());
  LOFT_CHECK(out.shape() == codes.shape() && out.device() == codes.device(), "dequantize: output ",
             out.str(), " does not match the codes ", codes.str());
  if (codes.device().is_cpu()) return dequantize_cpu(codes, scale, out);
#ifdef LOFT_WITH_CUDA
  cuda::dequantize(codes, scale, out);
#else
  throw Error(cat("dequantize: ", codes.str(), " is on a device this build cannot run on"));
#endif
}

Tensor dequantize(const QuantizedTensor& q, DType out_dtype) {
  Tensor out = Tensor::empty(q.codes.shape(), out_dtype, q.codes.device());
  dequantize(q.codes, &q.scale, out);
  return out;
}

}  // namespace loft::quant
