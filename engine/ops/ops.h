// The ops every model calls. Each op validates shapes, dtypes and devices once (ops.cpp,
// kv_cache_ops.cpp), then dispatches to the implementation for its tensors' device:
// engine/ops/cpu (the float32 reference) or engine/ops/cuda. All tensors of one call must be on
// one device. Outputs are preallocated by the caller (no hidden allocation in the step loop).
// The ops themselves, with what each computes, are the rows of op_list.def.
//
// Dtypes: the CPU backend computes in float32 (F32 tensors; it is the reference). The CUDA backend
// takes F32 or BF16 activations and accumulates in fp32. Small parameter vectors (norm weights,
// rope inverse frequencies) may be F32 or the activation dtype. Index tensors are I32.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft::ops {

// gemm's transposes and scales (op_list.def).
struct GemmOptions {
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;
};

// The CPU gemm works in blocks of this many along M, N and K (engine/ops/cpu/gemm_cpu.cpp):
// whatever the BLAS does inside a call, a product split at multiples of it along any dimension
// (LlamaModel's token tiles) makes the same calls on the same data as the whole, so the two agree
// bit for bit. Large, because each call packs its operands again (at 1024 that costs at most a
// few percent).
constexpr int64_t kGemmRowBlock = 1024;

// cross_entropy's target that adds no loss.
constexpr int32_t kIgnoreIndex = -100;

// One AdamW update's hyper-parameters, with PyTorch's semantics (decoupled weight decay, bias
// correction by `step`, counted from 1). They are doubles, as PyTorch's Python floats are: 1 − β
// is formed in double before it meets the fp32 tensors (1 − 0.999f would be off by 1.3e-5
// relative).
struct AdamWStep {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  int64_t step = 1;
};

// One optimizer's tensors: params[i], grads[i], m[i], v[i] are F32 of one shape, all on one device
// (the Tensors share storage with the owner's). On CUDA grad_norm_clip and adamw_all are one pass
// over all of them (multi-tensor kernels walking a device table of chunks); `plan` keeps that
// table between calls and is rebuilt when a tensor's storage moves. The CPU runs the per-tensor
// ops in sequence.
//
// copies (empty, or one per param; an undefined entry is none): BF16/F16 tensors of the param's
// shape that adamw_all sets to the updated param rounded to nearest even, as convert would.
struct AdamWTensors {
  std::vector<Tensor> params, grads, m, v, copies;
  std::shared_ptr<void> plan;  // the backend's; callers leave it alone
};

// Every op three times from one list: the validating op, the CPU reference, the CUDA version.
#define LOFT_OP(ret, name, params, args) ret name params;
#include "engine/ops/op_list.def"
namespace cpu {
#include "engine/ops/op_list.def"
}  // namespace cpu
namespace cuda {
#include "engine/ops/op_list.def"
}  // namespace cuda
#undef LOFT_OP

// Sum of a F32 tensor, in double on the host (device → host copy when needed).
double sum(const Tensor& x);

}  // namespace loft::ops
