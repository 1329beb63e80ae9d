// HALO's frozen projection (docs/methods.md, "HALO PEFT"; reference IST-DASLab/HALO): W is rotated
// along its input dimension once at load, and both products run in FP8 (E4M3 for X, W and dY
// alike) or INT8 with per-tensor scales:
//   level 0: Y = Q(X)·Q(W)ᵀ            dX = Q(dY)·Q(W)
//   level 1: Y = Q(X·H)·Q(W·H)ᵀ        dX = [Q(dY)·Q(W·H)]·Hᵀ
//   level 2: as 1                      dX = H_Tᵀ·[Q(H_T·dY)·Q(W·H)]·Hᵀ
// H_T rotates along the token dimension (quant::token_plan: blocks of up to 256 tokens, the count
// zero-padded to a block multiple when it has no such split). The rotated weight is kept either
// as codes (backbone dense; the dX GEMM's transposed codes are kept beside them, or made just
// before it in the device's shared scratch, quant::TransposeScratch: --halo-transposed), or NF4-DQ
// and decoded straight into the codes each GEMM needs (backbone nf4; the scale is fixed at load).
// At levels 1 and 2 the projections that read one input sum their dX products and rotate the sum
// back once (FrozenWeight::backward_input_grouped). The LoRA path stays in the compute dtype,
// unrotated and unquantized (LoraLinear).
// Shared, so it lives here rather than in engine/methods/halo/: HOT's --backbone fp8 is this store
// at level 0 in E4M3 (engine/methods/hot/hot_weight.cpp).
#pragma once
#include <string>

#include "engine/peft/frozen_weight.h"
#include "engine/peft/transposed_codes.h"
#include "engine/peft/weight_source.h"
#include "engine/quant/quantize.h"

namespace loft {

enum class HaloBackbone : uint8_t { Dense, Nf4 };

struct HaloOptions {
  int level = 2;                                       // 0, 1 or 2
  quant::LowpFormat format = quant::LowpFormat::E4M3;  // E4M3 (HALO "fp8") or INT8
  HaloBackbone backbone = HaloBackbone::Dense;
  // --halo-transposed, dense backbones only (NF4 decodes each GEMM's codes as it needs them);
  // unresolved auto (HOT's fp8 backbone, evaluation, export) transposes per step.
  TransposedCodes transposed = TransposedCodes::auto_choice;
};

// --halo-format: "fp8" (E4M3 for X, W and dY, as HALO does) or "int8". UsageError otherwise.
quant::LowpFormat parse_halo_format(const std::string& name);
// "fp8" / "int8": the --halo-format name of a HALO format (inverse of parse_halo_format).
std::string halo_format_name(quant::LowpFormat format);
// --backbone: "dense" or "nf4"; UsageError naming --backbone otherwise.
HaloBackbone parse_halo_backbone(const std::string& name);
const char* backbone_name(HaloBackbone b);

// Rotates and quantizes `weight` ([out, in]) once; its compute dtype is the LoRA path's. An FP8
// checkpoint's codes are taken as they are at level 0 in E4M3 with dense codes when the weight has
// one per-tensor scale; otherwise its exact fp32 values are rotated and quantized.
std::unique_ptr<FrozenWeight> halo_weight(const WeightSource& weight, const HaloOptions& opt);

}  // namespace loft
