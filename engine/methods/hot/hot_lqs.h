// HOT's layer-wise quantizer selection (LQS, docs/hot.md §5 and §8.1.7): on calibration batches, the
// dY of each frozen projection is rotated (we measure after the Hadamard transform, the reference
// code before it) and quantized both per token and per tensor with the training quantizer; the
// layer trains per token iff ‖Z − Q_tok(Z)‖₂ < 0.5·‖Z − Q_ten(Z)‖₂ (the code's rule, i.e. the
// squared error below a quarter). The sums run in double; the CUDA sum's order differs from the
// CPU's, so only the choice, not the error's last bits, is meant to agree.
#pragma once
#include "engine/methods/hot/hot_quant.h"

namespace loft::quant {

struct HotLqsErrors {
  double token = 0.0;   // Σ (z − q·s)² with per-token steps, over every calibration batch
  double tensor = 0.0;  // the same with one step per tensor
  int64_t batches = 0;
};

// Adds one batch's squared errors (opt.scale is ignored: both are measured; opt.site should name
// the LQS stream, hot::kStreamLqs).
void hot_lqs_accumulate(const Tensor& dy, const HotQuantOptions& opt, HotLqsErrors& errors);

// The code's rule on the accumulated errors.
inline HotScale hot_lqs_choice(const HotLqsErrors& e) {
  return e.token < 0.25 * e.tensor ? HotScale::PerToken : HotScale::PerTensor;
}

// Σ (z − code·step)² over the first z.size(0) rows of `codes` (z F32 [rows, cols]).
double hot_squared_error(const Tensor& z, const HotCodes& codes);

}  // namespace loft::quant
