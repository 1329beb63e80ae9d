// A frozen weight stored NF4 with double quantization (QLoRA's backbone, 4.127 bits/param),
// decoded to the compute dtype in one kernel before each GEMM.
#pragma once
#include "engine/peft/frozen_weight.h"
#include "engine/quant/nf4.h"

namespace loft {

// Quantizes `weight` ([out, in] in the compute dtype, on its device) and lets it go.
std::unique_ptr<FrozenWeight> nf4_weight(Tensor weight);

}  // namespace loft
