// Rotation and quantization in one step, for HALO's activations (x·H_in) and output gradients
// (H_T·dY): the codes and scale of quantize(rotated x) without keeping the rotated tensor.
// CPU: the unfused reference (rotate into a temporary, then quantize). CUDA: two passes over x,
// each rotating it again in shared memory: the first reduces the amax, the second casts; the
// rotated values are rounded to x's dtype first, exactly as the unfused path stores them, so the
// codes and scale are bit-identical to hadamard_transform + quantize on the same device.
#pragma once
#include "engine/quant/hadamard.h"
#include "engine/quant/quantize.h"

namespace loft::quant {

// quantize(x·H) for x [..., plan.n] (F32 on the CPU; F32 or BF16 on CUDA).
QuantizedTensor rotate_quantize(const HadamardPlan& plan, const Tensor& x, LowpFormat format);

// quantize(H_T·x) for x [tokens, N] with plan = token_plan(tokens): codes [plan.n, N], the padded
// rows included (they are rotated zeros, not zeros).
QuantizedTensor token_rotate_quantize(const HadamardPlan& plan, const Tensor& x,
                                      LowpFormat format);

}  // namespace loft::quant
