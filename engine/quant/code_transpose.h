// Byte transpose of quantized codes: dst [cols, rows] = src [rows, cols]ᵀ. A dX GEMM needs the
// frozen weight's codes the other way round (dX = dY·W has K = out, and FP8/INT8 tensor-core GEMMs
// take both operands K-major), so the methods transpose W's codes just before it
// (transpose_scratch.h) or keep a second, transposed copy where memory allows
// (engine/peft/transposed_codes.h). A pure copy of bytes:
// the CPU reference and the CUDA kernel are bit-identical.
#pragma once
#include "engine/tensor/tensor.h"

namespace loft::quant {

// src: 2-D codes of one byte each (U8, I8, F8_E4M3 or F8_E5M2); dst: the same dtype, [cols, rows],
// on src's device and not overlapping it. Throws Error naming the tensors otherwise.
void transpose_codes(const Tensor& src, Tensor& dst);
// The same into a new tensor.
Tensor transpose_codes(const Tensor& src);

}  // namespace loft::quant
