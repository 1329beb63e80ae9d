// Where a frozen low-precision backbone's codes transposed ([in, out], for the backward's dX GEMM,
// whose FP8/INT8 product takes both operands K-major) come from: --falqon-transposed and
// --halo-transposed. keep: each projection holds them (+1 byte a weight); per_step: each backward
// transposes the codes into one scratch the projections share (quant::TransposeScratch); auto:
// RunPlan picks keep where the run's estimate with the copies leaves room on every device,
// per_step otherwise (and where no plan resolves it: evaluation, export). Bit-identical either way.
#pragma once
#include <string>

namespace loft {

enum class TransposedCodes { auto_choice, keep, per_step };

// "auto", "keep" or "per-step"; UsageError naming `option` otherwise.
TransposedCodes parse_transposed_codes(const std::string& option, const std::string& name);
const char* transposed_codes_name(TransposedCodes t);

}  // namespace loft
