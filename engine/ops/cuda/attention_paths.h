// The two CUDA attention implementations behind ops::cuda::attention/attention_backward (semantics:
// ops.h; arguments already validated by ops.cpp) and the pieces they share. Internal to
// engine/ops/cuda: callers use attention_cuda.h, which picks the path.
//   gemm:  cuBLAS batched GEMMs around masked-softmax kernels over bounded fp32 score scratch;
//          any head dim, F32 (full fp32) or BF16.
//   flash: fused FlashAttention-2-style kernels on bf16 tensor cores (mma.sync m16n8k16), no
//          score scratch, key tiles above the causal diagonal or before a row's documents skipped;
//          BF16 with head dim 64 or 128 only (flash_supports).
#pragma once
#include <cstddef>

#include "engine/tensor/tensor.h"

namespace loft::ops::cuda_attention {

void gemm_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
                  int64_t seq, float scale, Tensor& out, Tensor& lse);
void gemm_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& out, const Tensor& lse, const Tensor& doc_start, int64_t seq,
                   float scale, Tensor& dq, Tensor& dk, Tensor& dv);
size_t gemm_set_scratch_budget(size_t bytes);

bool flash_supports(const Tensor& q, const Tensor& k, int64_t seq);
void flash_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
                   int64_t seq, float scale, Tensor& out, Tensor& lse);
// True when this build has sm_90a code (LOFT_CUDA_ARCHS names 90a) and `device` is compute
// capability 9.0 and lets a block take `shared_bytes`: where the wgmma kernels run.
bool hopper_kernel_runs_on(int device, size_t shared_bytes);
// The forward on Hopper's warpgroup MMA (attention_flash_forward_hopper.cu): head dim 128 on a
// compute capability 9.0 device when the build has sm_90a code; flash_forward takes it there.
bool hopper_forward_supports(const Tensor& q, int64_t seq);
void flash_forward_hopper(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
                          int64_t seq, float scale, Tensor& out, Tensor& lse);
bool flash_set_hopper_forward(bool allowed);
// Queries attending to a KV cache (ops::cached_attention with its tile table): tiles I32 [n, 4],
// each (first token, rows <= 64, slot, position of the first row), covering every token of q once.
bool flash_cached_supports(const Tensor& q, const Tensor& k_cache, int64_t tiles);
void flash_cached_forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                          const Tensor& tiles, float scale, Tensor& out);
size_t flash_set_shared_limit(size_t bytes);
// The backward on wgmma (attention_flash_backward_hopper.cu): head dim 128 on a compute
// capability 9.0 device when the build has sm_90a code.
bool hopper_backward_supports(const Tensor& q);
bool flash_set_hopper_backward(bool allowed);
// The kernel flash_backward runs for q (head dim 64 or 128) on its device.
enum class FlashBackwardKernel { hopper, keys128, keys64 };
FlashBackwardKernel flash_backward_kernel_for(const Tensor& q);
void flash_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                    const Tensor& out, const Tensor& lse, const Tensor& doc_start, int64_t seq,
                    float scale, Tensor& dq, Tensor& dk, Tensor& dv);

// drow [T, Hq] F32 = Σ_d dout·out per (token, head): the softmax Jacobian's diagonal term that
// both backward passes subtract from dP. Queued on the device's loft stream.
void softmax_row_dot(const Tensor& dout, const Tensor& out, Tensor& drow);

}  // namespace loft::ops::cuda_attention
