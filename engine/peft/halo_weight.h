// HALO's frozen projection (METHODS.md, "HALO PEFT"; reference IST-DASLab/HALO): W is rotated
// along its input dimension and quantized once at load, with its transpose kept for the backward
// GEMM, and both products run in FP8 (E4M3 for X, W and dY alike) or INT8 with per-tensor scales:
//   level 0: Y = Q(X)·Q(W)ᵀ            dX = Q(dY)·Q(W)
//   level 1: Y = Q(X·H)·Q(W·H)ᵀ        dX = [Q(dY)·Q(W·H)]·Hᵀ
// (level 2, which also rotates dY along the token dimension, is not built yet). The LoRA path
// stays in the compute dtype, unrotated and unquantized (LoraLinear).
#pragma once
#include "engine/peft/frozen_weight.h"
#include "engine/quant/quantize.h"

namespace loft {

struct HaloOptions {
  int level = 1;                                 // 0 or 1
  quant::LowpFormat format = quant::LowpFormat::E4M3;  // E4M3 (HALO "fp8") or INT8
};

// Rotates and quantizes `weight` ([out, in], compute dtype) and lets the original go.
std::unique_ptr<FrozenWeight> halo_weight(Tensor weight, const HaloOptions& opt);

}  // namespace loft
