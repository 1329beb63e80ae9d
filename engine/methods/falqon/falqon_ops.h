// The element-level pieces of FALQON (docs/methods.md, "FALQON: melded FP8 LoRA"), each with a CPU
// reference and a CUDA kernel (engine/methods/falqon/cuda/falqon_kernels.cu) that give
// bit-identical results: the same fp32 operations in the same order, fused multiply-adds spelled
// out (std::fma / __fmaf_rn) so no compiler contracts differently, and the shared E4M3 encoder
// (engine/quant/fp8.h).
// Every function validates its tensors (one device, dtypes, shapes) and throws Error naming them.
#pragma once
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft::falqon {

// codes = E4M3(x / s) with a GIVEN scale s (F32 [1]): A's rows join W's codes under W's scale.
// x F32, codes F8_E4M3 of x's shape. Values beyond ±448·s saturate (the encoder's rule).
void encode_e4m3(const Tensor& x, const Tensor& scale, Tensor& codes);

// scores [out] F32: ρ_i = Σ_j |B_ij| summed in j order, b F32 [out, r].
void row_scores(const Tensor& b, Tensor& scores);

// idx I32 [k]: the k rows with the largest scores, ties going to the lower index (a total order
// on the scores' bit patterns, so NaN ranks above +inf), written in ascending index order.
// 0 < k <= scores.numel().
void select_topk(const Tensor& scores, Tensor& idx);

// The row update after an optimizer step, for the distinct rows in idx [k] I32:
//   W_i ← E4M3(clamp(deq(W_i) + B_i·A_q, ±448·s) / s)   (fp32: acc = Σ_c fma(B_ic, A_q[c, j], acc),
//   then fma(decode(W_ij), s, acc); A_q = decode(A codes)·s)
// wm: F8_E4M3 [(out+r), in], rows 0..out-1 the backbone, rows out.. the A codes (read only);
// wt: F8_E4M3 [in, out], a transposed backbone patched alike, or undefined (FalqonLinear keeps
// none: it transposes W's codes before each dX GEMM); changed: U8 [out], set to 1 for
// a row where some code changed (a code whose value stays zero keeps its sign bit); applied F32
// [out, r] += B_i for the rows in idx. Then B's rows in idx are zeroed, or all of B when zero_all
// ("reset" mode).
struct RowUpdate {
  Tensor idx, b, wm, wt, scale, changed, applied;
};
void apply_rows(RowUpdate& u, bool zero_all);

// One projection's after-step update: row_scores(update.b, scores), select_topk(scores,
// update.idx), apply_rows(update, zero_all).
struct AfterStep {
  RowUpdate update;
  Tensor scores;
  bool zero_all = false;
};
// Those calls for each of `steps` (which share no tensor), with the results of making them in
// turn; on a GPU each phase is one launch for all of them (224 projections: 4 launches, not 896).
void after_steps(std::vector<AfterStep>& steps);

}  // namespace loft::falqon
