// CUDA causal self-attention with grouped-query heads and document masking: ops::cuda::attention
// and attention_backward (semantics: op_list.def), and what tests ask of the path they take.
// q/k/v/out/dout/dq/dk/dv: F32 or BF16 (one dtype per call), lse F32, doc_start I32, all on one
// CUDA device; callers validate through ops.cpp. Two paths (attention_paths.h):
//   - BF16 with head dim 64 or 128: fused flash kernels (no S×S scratch, causal tiles skipped;
//     at head dim 128 on an H100/H200 on wgmma, elsewhere on mma.sync);
//     dq is accumulated with fp32 atomics, so its low bits may vary from run to run.
//   - everything else (F32, other head dims): cuBLAS batched GEMMs around masked-softmax kernels.
//     F32 runs in full fp32 (no TF32).
// BF16 rounds the probabilities (and dS) to bf16 for the tensor-core products, like
// FlashAttention; softmax statistics and dk/dv/dq sums are fp32. A doc_start outside [0, i]
// (which the CPU reference reports) is clamped into the row here: checking it would cost a device
// sync per call.
#pragma once
#include <cstddef>

#include "engine/ops/ops.h"

namespace loft::ops::cuda_attention {

// True when cuda::attention and attention_backward take the flash kernels for these q, k (tests
// assert it).
bool uses_flash(const Tensor& q, const Tensor& k, int64_t seq);

// GEMM path only: bytes of score scratch one call may hold at once (default 256 MiB). Sequences
// whose scores do not fit are processed in blocks of query rows. Tests lower it to exercise the
// chunked paths; returns the previous value.
size_t set_scratch_budget(size_t bytes);

// Flash backward only: the shared memory per block it may assume the device grants (0, the
// default: the device's own limit). The 128-key layout runs only where its blocks fit, else the
// 64-key kernel; tests set a consumer card's 99 KiB to run that kernel on a Hopper GPU. Returns
// the previous value.
size_t set_flash_shared_limit(size_t bytes);

// True when the forward takes the Hopper kernel (wgmma, sm_90a build, head dim 128 on a compute
// capability 9.0 GPU) rather than the mma.sync one every other GPU runs.
bool uses_hopper_forward(const Tensor& q, const Tensor& k, int64_t seq);

// True when the backward takes the Hopper kernel (wgmma; the same terms as the forward's, and the
// flash shared limit high enough for the 128-key layout).
bool uses_hopper_backward(const Tensor& q, const Tensor& k, int64_t seq);

// Whether this build has the Hopper kernels' code (LOFT_CUDA_ARCHS names 90a).
bool hopper_kernels_built();

// Allow (the default) or forbid the Hopper forward / backward, so tests run the other GPUs'
// kernels on an H100/H200; return the previous setting.
bool set_hopper_forward(bool allowed);
bool set_hopper_backward(bool allowed);

}  // namespace loft::ops::cuda_attention
