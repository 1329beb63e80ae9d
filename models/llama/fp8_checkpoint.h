// One weight of an FP8 checkpoint (fp8_config.h) read as codes + scales, with every check on its
// scale tensor done before anything is decoded.
#pragma once
#include <string>

#include "engine/io/safetensors_checkpoint.h"
#include "engine/quant/scaled_fp8.h"
#include "models/llama/fp8_config.h"

namespace loft::llama {

// "X.weight" -> "X.weight_scale_inv" (transformers fp8) or "X.weight_scale" (compressed-tensors);
// "" for a tensor that is not a weight (a bias has no scale).
std::string fp8_scale_name(const Fp8Checkpoint& q, const std::string& weight_name);

// For a weight `name` in `ckpt`: stored F8_E4M3, its codes (a view of the file) and its scales as
// F32 [ceil(out / rows), ceil(in / cols)] for q's blocks; stored dense, an undefined ScaledFp8
// (and it must have no scale tensor). Every failure is one Error naming the file and the tensor:
// a missing scale, a scale of the wrong dtype (F32, BF16 or F16 are read) or shape, a non-finite
// or negative scale, an F8_E5M2 or non-2-D FP8 weight, a nonzero zero point.
quant::ScaledFp8 read_fp8_weight(const SafetensorsCheckpoint& ckpt, const Fp8Checkpoint& q,
                                 const std::string& name);

}  // namespace loft::llama
