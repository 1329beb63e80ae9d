// The CPU half of an op's optional amax output (op_list.def): max |value| over the F32 output,
// NaN skipped, folded into the F32 [1] amax with its prior value.
#pragma once
#include "engine/core/max_abs.h"
#include "engine/tensor/tensor.h"

namespace loft::ops::cpu {

inline void fold_amax(Tensor* amax, const Tensor& out) {
  if (amax) *amax->ptr<float>() = max_abs(out.ptr<float>(), out.numel(), *amax->ptr<float>());
}

}  // namespace loft::ops::cpu
