// An NF4-DQ weight decoded straight into FP8/INT8 codes (HALO with an NF4-compressed backbone,
// docs/methods.md): codes = Q(deq(q) / scale) element by element, with deq exactly as
// dequantize_nf4 to F32 and the per-tensor scale known up front, so no amax pass and no decoded
// weight ever exist. With scale = nf4_lowp_scale(q, f) the codes equal quantize(deq(q), f)'s.
#pragma once
#include "engine/quant/nf4.h"
#include "engine/quant/quantize.h"

namespace loft::quant {

// max |deq(q)| exactly: per block, the decoded absmax times the largest |level| its codes use
// (fp32 rounding is monotone, so that product is the block's largest |element|). Reads the codes
// on the host: once, at load.
float nf4_max_abs(const Nf4Tensor& q);
// scale_for_amax(nf4_max_abs(q), f): the scale quantize(deq(q), f) would derive.
float nf4_lowp_scale(const Nf4Tensor& q, LowpFormat f);

// q of a 2-D weight [rows, cols]; codes (F8_E4M3, F8_E5M2 or I8, on q's device) [rows, cols], or
// [cols, rows] holding the transpose when `transposed` (the K-major copy dX = dY·W needs). One
// kernel on CUDA; the CPU reference gives the same bytes.
void nf4_to_lowp(const Nf4Tensor& q, float scale, bool transposed, Tensor& codes);

}  // namespace loft::quant
