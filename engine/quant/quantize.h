// Symmetric per-tensor quantization to FP8 (E4M3, E5M2) or INT8 (docs/methods.md, notation):
// s = amax/qmax in fp32 (s = 1 when amax = 0), q = Q(x / s) with an IEEE fp32 division, rounded to
// nearest even and saturated at ±qmax. The CPU and CUDA paths use the same formula and the same
// scalar encoders (fp8.h, int8.h), so their codes and scales are bit-identical.
// amax ignores NaN elements (they get the NaN code, or 0 in INT8); an infinite element makes the
// scale inf, which callers can test for overflow.
#pragma once
#include <array>
#include <string_view>

#include "engine/tensor/tensor.h"

namespace loft::quant {

enum class LowpFormat : uint8_t { E4M3, E5M2, INT8 };

float qmax(LowpFormat f);                 // 448, 57344, 127
// Each code's value (unscaled) in a format, for the CPU loops that decode millions of codes.
const std::array<float, 256>& code_values(LowpFormat f);
DType code_dtype(LowpFormat f);           // F8_E4M3, F8_E5M2, I8
std::string_view format_name(LowpFormat f);  // "e4m3", "e5m2", "int8"
// The format whose codes a tensor of this dtype holds; throws naming `what` otherwise.
LowpFormat format_of(DType code_dtype, std::string_view what);

struct QuantizedTensor {
  LowpFormat format = LowpFormat::E4M3;
  Tensor codes;    // x's shape, code_dtype(format), on x's device
  Tensor codes_t;  // for 2-D x when asked: the transposed codes [cols, rows]; else undefined
  Tensor scale;    // F32 [1] on x's device: x ≈ decode(codes) * scale
};

// x: F32 or BF16, any shape, CPU or CUDA. also_transposed needs a 2-D x (the K-major copy a GEMM
// on the other side of a projection needs). amax, when given: F32 [1] on x's device holding
// max |x| (NaN skipped), as the op that wrote x computed it (ops.h's *_amax outputs); the amax
// pass over x is then skipped, and the codes and scale are the same bytes.
QuantizedTensor quantize(const Tensor& x, LowpFormat format, bool also_transposed = false,
                         const Tensor* amax = nullptr);
// Same, into preallocated codes (and codes_t when defined) and scale (no allocation).
void quantize_into(const Tensor& x, Tensor& codes, Tensor* codes_t, Tensor& scale,
                   const Tensor* amax = nullptr);

// The scale quantize() derives from an amax: amax / qmax in fp32, 1 when amax is 0.
float scale_for_amax(float amax, LowpFormat f);
// CPU: codes[i] = Q(x[i] / scale), the cast quantize() does once its scale is known.
void encode_cpu(LowpFormat f, const float* x, int64_t n, float scale, uint8_t* codes);

// out = decode(codes) * scale (one fp32 multiply, then rounded to out's dtype). out: F32 or BF16
// of codes' shape on codes' device. A null scale means 1 (the raw code values, which are exact in
// bf16 for all three formats).
void dequantize(const Tensor& codes, const Tensor* scale, Tensor& out);
Tensor dequantize(const QuantizedTensor& q, DType out_dtype = DType::F32);

}  // namespace loft::quant
