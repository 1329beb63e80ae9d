// CUDA causal self-attention with grouped-query heads and document masking (semantics: ops.h).
// First version: cuBLAS batched GEMMs on tensor cores around fused masked-softmax kernels; the
// fp32 scores of a group of (row, head) pairs live in a bounded scratch and the backward
// recomputes them from the saved lse. q/k/v/out/dout/dq/dk/dv: F32 or BF16 (one dtype per call),
// lse F32, doc_start I32, all on one CUDA device; callers validate through ops.cpp. F32 runs in
// full fp32 (no TF32); BF16 rounds the probabilities to bf16 for the P·V products, like
// FlashAttention, and accumulates dk/dv in fp32. A doc_start outside [0, i] (which the CPU
// reference reports) is clamped into the row here: checking it would cost a device sync per call.
#pragma once
#include <cstddef>

#include "engine/tensor/tensor.h"

namespace loft::ops::cuda_attention {

void forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
             int64_t seq, float scale, Tensor& out, Tensor& lse);
void backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
              const Tensor& out, const Tensor& lse, const Tensor& doc_start, int64_t seq,
              float scale, Tensor& dq, Tensor& dk, Tensor& dv);

// Bytes of score scratch one call may hold at once (default 256 MiB). Sequences whose scores do
// not fit are processed in blocks of query rows. Tests lower it to exercise the chunked paths;
// returns the previous value.
size_t set_scratch_budget(size_t bytes);

}  // namespace loft::ops::cuda_attention
