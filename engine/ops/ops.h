// The op table every model calls. Each op validates shapes, dtypes and devices here, once, then
// dispatches to the backend of its tensors' device (engine/ops/cpu, engine/ops/cuda). All tensors
// of one call must be on one device. Outputs are preallocated by the caller (no hidden allocation
// in the step loop).
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

// ---- GEMM ----------------------------------------------------------------------------------
// C = alpha * op(A) · op(B) + beta * C, with op(X) = Xᵀ when trans_X. 2-D tensors:
// op(A) is [M, K], op(B) is [K, N], C is [M, N]. A linear layer Y = X·Wᵀ is gemm(X, W, Y, false,
// true). With beta = 0, C's prior contents are ignored (NaN in C does not leak).
// Dtypes: CPU F32×F32→F32; CUDA F32×F32→F32, BF16×BF16→BF16 or BF16×BF16→F32.
struct GemmOptions {
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;
};
void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmOptions& opt = {});

// ---- elementwise ---------------------------------------------------------------------------
// dst = src converted to dst's dtype (float dtypes F32/BF16/F16; round to nearest even).
void convert(const Tensor& src, Tensor& dst);
// y += alpha * x (same shape and dtype). Residual adds and gradient accumulation.
void axpy(float alpha, const Tensor& x, Tensor& y);
// x *= alpha, in place.
void scale(Tensor& x, float alpha);

// Fills x with reproducible pseudo-random values, uniform on [−√3·std, √3·std) (mean 0, variance
// std²; std >= 0). Counter-based: element i depends only on (seed, i), never on the backend or
// thread layout, so CPU and CUDA write the same fp32 values for the same seed (BF16 = those values
// rounded to nearest even). The generator is spelled out in engine/ops/counter_rng.h. For random
// weight initialisation (benchmarks) on the device, with no host round trip.
void fill_random(Tensor& x, uint64_t seed, float std);

// ---- RMSNorm (Llama) -----------------------------------------------------------------------
// x [rows, D], weight [D]: y = weight * (x * rstd), rstd = 1/sqrt(mean(x²) + eps), computed in
// fp32. Writes rstd [rows] F32 when given (saved for backward).
void rmsnorm(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor* rstd = nullptr);
// dx = d(rmsnorm)/dx · dy, using the saved rstd. dweight (F32 [D]), when given, is ACCUMULATED.
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      Tensor& dx, Tensor* dweight = nullptr);
// The residual add fused into the norm (one pass fewer over [rows, D]): x ← residual + x, rounded
// to x's dtype exactly as axpy(1, residual, x) rounds it, then rmsnorm(x, weight, eps, y, rstd).
// Bit-identical to those two calls on every backend.
void add_rmsnorm(const Tensor& residual, Tensor& x, const Tensor& weight, float eps, Tensor& y,
                 Tensor* rstd = nullptr);
// The backward of a norm whose input also feeds a residual path: dx = rmsnorm_backward(...) + add,
// the norm gradient rounded to dx's dtype, then add added in fp32 and rounded again.
// Bit-identical to rmsnorm_backward(dy, x, weight, rstd, dx, dweight) then axpy(1, add, dx). dx
// may alias dy, x or add.
void rmsnorm_backward_add(const Tensor& dy, const Tensor& x, const Tensor& weight,
                          const Tensor& rstd, const Tensor& add, Tensor& dx,
                          Tensor* dweight = nullptr);

// ---- RoPE (Hugging Face rotate-half convention) --------------------------------------------
// x [tokens, heads, head_dim], rotated in place: for i < head_dim/2, with θ = pos·inv_freq[i]
// (fp32): x[i] ← x[i]·cos θ − x[i+h/2]·sin θ ; x[i+h/2] ← x[i+h/2]·cos θ + x[i]·sin θ.
// positions [tokens] I32; inv_freq [head_dim/2] F32 (from rope_inv_freq). inverse = rotate by
// −θ, which is exactly the backward of the forward rotation.
void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse = false);

// ---- SwiGLU --------------------------------------------------------------------------------
// out = silu(gate) * up, all [rows, F].
void swiglu(const Tensor& gate, const Tensor& up, Tensor& out);
// dgate = dout·up·silu'(gate); dup = dout·silu(gate). dgate/dup may alias gate/up.
void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate,
                     Tensor& dup);

// ---- embedding -----------------------------------------------------------------------------
// out[t] = table[ids[t]]; table [V, D], ids [T] I32, out [T, D]. An id outside [0, V) is an
// error naming the token position (checked on the host for CPU; on CUDA the kernel writes zeros
// and raises a device-side flag that the op turns into the same error).
void embedding(const Tensor& table, const Tensor& ids, Tensor& out);
// dtable[ids[t]] += dout[t] (dtable F32 [V, D], accumulated).
void embedding_backward(const Tensor& dout, const Tensor& ids, Tensor& dtable);

// ---- softmax cross-entropy -----------------------------------------------------------------
// logits [T, V]; targets [T] I32, kIgnoreIndex (-100) = no loss. Writes losses [T] F32
// (-log softmax(logits)[target], 0 for ignored rows), computed in fp32 with a max-subtracted
// log-sum-exp. When dlogits is given ([T, V], may be the same tensor as logits: overwritten in
// place), writes grad_scale · (softmax − onehot(target)) per row, 0 for ignored rows; dlogits is
// the logits' dtype, or BF16 for F32 logits (the gradient rounded once, ready for a bf16 GEMM,
// without a conversion pass over [T, V]). Callers
// chunk over T so that [T, V] is never materialised for the whole batch.
constexpr int32_t kIgnoreIndex = -100;
void cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& losses,
                   Tensor* dlogits = nullptr, float grad_scale = 1.0f);

// ---- causal self-attention (grouped-query heads, document masking) ---------------------------
// Tokens are B rows of S positions, flattened: T = B·S. q [T, Hq, D]; k, v [T, Hkv, D] with
// Hq % Hkv == 0 (query head h reads kv head h / (Hq/Hkv)). doc_start [T] I32 holds, for each
// token, the row-local index of the first token of its document (all 0 without packing). Query
// at row-local position i attends key j iff doc_start[i] <= j <= i, so packed documents never see
// each other. scores = scale · q·k; out [T, Hq, D] = softmax(scores)·v; lse [T, Hq] F32 is the
// log-sum-exp of each query's scores (saved for backward). fp32 softmax on every backend.
void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
               int64_t seq, float scale, Tensor& out, Tensor& lse);
// Gradients of attention given dout and the forward's out and lse. dq, dk, dv are overwritten.
void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, const Tensor& lse, const Tensor& doc_start,
                        int64_t seq, float scale, Tensor& dq, Tensor& dk, Tensor& dv);

// ---- optimizer ---------------------------------------------------------------------------------
// One AdamW update with PyTorch's semantics (decoupled weight decay, bias correction by `step`,
// counted from 1). param, grad, m, v: F32, same shape; m and v are updated in place. The
// hyper-parameters are doubles, as PyTorch's Python floats are: 1 − β is formed in double before
// it meets the fp32 tensors (1 − 0.999f would be off by 1.3e-5 relative).
struct AdamWStep {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  int64_t step = 1;
};
void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& s);
// Σ x² of a F32 tensor, accumulated in double (syncs with the device). Deterministic: the same
// tensor gives the same bits on every run (the CUDA reduction has a fixed order).
double sum_squares(const Tensor& x);

// ---- the optimizer over all of a model's tensors at once ----------------------------------------
// One optimizer's tensors: params[i], grads[i], m[i], v[i] are F32 of one shape, all on one device
// (the Tensors share storage with the owner's). On CUDA each op below is one pass over all of them
// (multi-tensor kernels walking a device table of chunks); `plan` keeps that table between calls
// and is rebuilt when a tensor's storage moves. The CPU runs the per-tensor ops in sequence.
struct AdamWTensors {
  std::vector<Tensor> params, grads, m, v;
  std::shared_ptr<void> plan;  // the backend's; callers leave it alone
};
// The global gradient norm √(Σᵢ Σ gᵢ²) (double; on CUDA in a fixed order, so the same bits on every
// run, not the CPU's order), and grad_scale (F32 [1] on the grads' device) ← clip_factor(norm,
// max_norm) (adamw_math.h: torch's clip_grad_norm_; 1 when max_norm <= 0). On CUDA the factor is
// computed on the device; copying the norm back is the one wait.
double grad_norm_clip(AdamWTensors& t, double max_norm, Tensor& grad_scale);
// ops::adamw on every param with grads[i] · grad_scale[0] (rounded to F32 as ops::scale rounds;
// grad_scale null: the grads as they are) as its gradient, then every grad set to 0 (consumed).
void adamw_all(AdamWTensors& t, const Tensor* grad_scale, const AdamWStep& s);

// Sum of a F32 tensor, in double on the host (device → host copy when needed).
double sum(const Tensor& x);

}  // namespace loft::ops
