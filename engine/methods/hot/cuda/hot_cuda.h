// CUDA halves of HOT's quantizers and integer GEMM (engine/methods/hot/hot_quant.h, hot_gemm.h,
// which validate the operands first). Plain C++ header: callable from .cpp files of a CUDA build.
// All work is queued on cuda::stream(device); nothing synchronises except hot_squared_error.
#pragma once
#include "engine/methods/hot/hot_quant.h"

namespace loft::quant::cuda {

// hot_quantize_dy_into: one thread block per row, which reads the row once (16-byte loads), keeps
// its rotated 16-groups in registers through the row's amax (per token) and writes the codes with
// one 16-byte store per group, one Philox draw per four codes; per tensor a grid amax pass first.
// out's codes and scale are fully written (padding rows and columns zeroed).
void hot_quantize_dy(const Tensor& dy, const HotQuantOptions& opt, HotCodes& out, Tensor* overflow);
// hot_weight_codes: one thread per (in-channel, 16-row strip): a column amax pass, then the codes.
void hot_weight_codes(const Tensor& w, HotCodes& out);
// z F32 [rows, n] = the rows of dy rotated.
void hot_rotate_rows(const Tensor& dy, Tensor& z);
// packed U8 [rows, k/2] from codes I8 [rows, k].
void hot_pack_s4(const Tensor& codes, Tensor& packed);

// Compute capability 8.0 to 8.9: INT4 tensor cores (Ampere, Ada). Hopper and Blackwell lack them.
bool hot_has_int4_tensor_cores(int device);
// acc I32 [M, N] = a·bᵀ with mma.sync: s8 codes a [M, K], b [N, K] (K a multiple of 64), or
// packed s4 a [M, K/2], b [N, K/2] (K/2 a multiple of 64). acc's row stride is N.
void hot_mma_s8(const Tensor& a, const Tensor& b, Tensor& acc);
void hot_mma_s4(const Tensor& a_packed, const Tensor& b_packed, Tensor& acc);
// cuBLASLt's INT8 IGEMM (engine/quant/cuda/lowp_gemm_cublaslt.cpp); false when it cannot.
bool hot_igemm_cublaslt(const Tensor& a, const Tensor& b, Tensor& acc);

// dx = dx_base(acc, s_t, s_w, inv_block) [+ dx_lora] [+ dx], dx F32 or BF16 [rows, cols]; acc's
// row stride is acc.size(1). Eight columns a thread with 16-byte accesses where aligned.
void hot_epilogue(const Tensor& acc, const Tensor& s_t, const Tensor& s_w, float inv_block,
                  const Tensor* dx_lora, Tensor& dx, bool accumulate);

// Σ (z − code·step)² in double (device atomics; synchronises to return it).
double hot_squared_error(const Tensor& z, const Tensor& codes, const Tensor& scale);

}  // namespace loft::quant::cuda
