// NaN/Inf detection on stored float tensors, read straight from their bits (F32, F16, BF16,
// F8_E4M3, F8_E5M2; integer tensors are always finite). Loading a checkpoint, an adapter or a
// resumed checkpoint runs it once per tensor, so a corrupt file is refused naming the tensor
// instead of training or evaluating to NaN.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "engine/tensor/tensor.h"

namespace loft {

// Index of the first NaN/Inf element of a host tensor, or nullopt.
std::optional<int64_t> first_nonfinite(const Tensor& host);

// Throws Error("<where>: tensor <name> holds NaN or Inf (element i)") when `host` is not finite.
void require_finite(const Tensor& host, const std::string& name, const std::string& where);

}  // namespace loft
