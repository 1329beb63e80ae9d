// FALQON's projection (docs/methods.md, "FALQON: melded FP8 LoRA"; reference iamkanghyunchoi/falqon).
// The adapter's A is melded into the frozen weight: Wm = [W; A] is one E4M3 matrix with W's scale
// s_w, so the forward is Xq·Wmᵀ = [O | O_A] over one code matrix. B (the "ΔB buffer", fp32 [out×r]) is the
// only trainable tensor; the forward ignores it (it is zero, or holds only unapplied rows), and
// after every optimizer step its top-k rows (by Σ|B_ij|) are folded into the FP8 backbone codes.
//   init:     E = W − deq(Q(W)); E ≈ B̂·Â (rank-r randomized SVD), Â = √σ·Vᵀ, B̂ = U·√σ
//             (E = 0, an exact FP8 base: Â Kaiming-uniform as LoRA's A, B̂ = 0)
//   forward:  Xq = E4M3(X); [O | O_A] = Xq·Wmᵀ (two GEMMs over Wm's row slices); y = O; save O_A
//   backward: dYq = E5M2(dY); dX = dYq·W_q (W's codes transposed into the device's shared
//             scratch just before: no resident transposed copy); dB += dYqᵀ·E4M3(O_A) (FP8 GEMM)
//   step:     W_i ← E4M3(clamp(deq(W_i) + B_i·A_q, ±448·s_w)) for the top-k rows; B ← 0 (reset)
//             or only those rows (accumulate)
// A's entries above 448·s_w saturate at ±448·s_w (the reference keeps W's scale for the melded
// matrix too); with Â = √σ·Vᵀ of a quantization error they are ~1e-2 of that bound on Llama
// weights, so saturation does not occur in practice. The trained model IS the FP8 backbone.
#pragma once
#include <string>

#include "engine/methods/falqon/falqon_ops.h"
#include "engine/peft/adapted_linear.h"
#include "engine/peft/transposed_codes.h"
#include "engine/quant/transpose_scratch.h"

namespace loft {

struct FalqonOptions {
  enum class Buffer { reset, accumulate };
  // --falqon-transposed (engine/peft/transposed_codes.h): kept codes are patched by the row
  // update; per_step transposes ~135 us a llama3-8b layer.
  using Transposed = TransposedCodes;
  int topk = 0;                    // rows updated per step; 0 = the rank (the reference's k = r)
  // --falqon-buffer. accumulate by default, not the reference code's reset: docs/methods.md.
  Buffer buffer = Buffer::accumulate;
  Transposed transposed = Transposed::auto_choice;
  uint64_t seed = 0;               // the SVD's random directions (mixed with the module name)
};

// --falqon-buffer: "reset" or "accumulate"; UsageError naming the option otherwise.
FalqonOptions::Buffer parse_falqon_buffer(const std::string& name);
const char* falqon_buffer_name(FalqonOptions::Buffer buffer);  // "reset", "accumulate"

class FalqonLinear : public AdaptedLinear {
 public:
  // weight [out, in] with compute dtype F32 or BF16 on any device; it is not kept. A per-tensor
  // FP8 checkpoint's codes and scale become W's codes bit for bit (no quantization error: Â then
  // starts as LoRA's A, see falqon_linear.cpp); other FP8 layouts are requantized per tensor from
  // their exact fp32 values.
  FalqonLinear(std::string name, const WeightSource& weight, int rank, const FalqonOptions& opt);

  int64_t in_features() const override { return in_; }
  int64_t out_features() const override { return out_; }
  void forward(const Tensor& x, Tensor& y, LinearSaved* saved,
               SharedInput* shared = nullptr) override;
  void save_for_backward(const Tensor& x, LinearSaved& saved, SharedInput* shared) override {
    forward_parts(x, nullptr, &saved, shared);
  }
  void backward(const Tensor& dy, const LinearSaved& saved, Tensor& dx, bool accumulate_dx,
                const Tensor* dy_amax = nullptr, SharedBackward* shared = nullptr) override;
  // X and dY are quantized per tensor: their amax may come from the ops that wrote them.
  bool takes_amax() const override { return true; }
  std::vector<Param*> params() override { return {&b_}; }
  // Folds B's top-k rows into the backbone codes (FALQON has no derived copies to refresh).
  void after_step() override;
  // Every FALQON projection's after_step at once (falqon::after_steps: a launch a phase).
  AfterStepAll after_step_all() const override { return &after_steps_of; }
  // deq(backbone rows) [out, in] F32 on the CPU: the trained model.
  Tensor merged_weight() const override;
  // {Â, ΣΔB_applied − B̂}, scaling 1 (the adapter records alpha = r): W + B·Â is the trained
  // weight to first order (deq(Q(W)) = W − E ≈ W − B̂·Â). `loft export --format peft` fits the
  // exact rank-r best of deq(trained) − W instead (export/peft_export.h).
  std::optional<std::pair<Tensor, Tensor>> peft_pair() const override;
  // The backbone's codes and s_w.
  std::optional<std::pair<Tensor, float>> trained_fp8() const override;
  // falqon_scale F32 [1]; falqon_rows I32 [n] (rows whose codes changed since Q(W), ascending) and
  // falqon_row_codes U8 [n, in]; falqon_a_codes U8 [r, in] (so the rebuild does not depend on
  // redoing the SVD bit for bit on another device); falqon_applied F32 [out, r]; in accumulate
  // mode falqon_pending F32 [out, r] (B's unapplied rows).
  std::map<std::string, Tensor> method_state() const override;
  // Onto a layer freshly built from the same base weight: checks s_w (Error naming the module),
  // overwrites the saved rows and A's codes, restores ΣΔB_applied and the pending B.
  void load_method_state(const std::map<std::string, Tensor>& state) override;
  // --shard-backbone: the melded codes (and the kept transposed ones), which the row update writes.
  std::vector<Tensor*> sharded_tensors() override {
    if (wt_.defined()) return {&wm_, &wt_};
    return {&wm_};
  }
  bool writes_sharded_tensors() const override { return true; }

  int rank() const { return rank_; }
  // Host copies for tests and export: Wm's codes [(out+r), in] U8, the transposed backbone codes
  // [in, out] U8 (made on demand), and s_w.
  Tensor melded_codes() const;
  Tensor transposed_codes() const;
  // A host copy of the transposed backbone codes this projection keeps
  // (FalqonOptions::Transposed::keep), U8 [in, out]; undefined when each backward makes them.
  Tensor kept_transposed() const;
  float weight_scale() const;
  Param& buffer() { return b_; }

 private:
  static void after_steps_of(const std::vector<AdaptedLinear*>& same_method);
  falqon::AfterStep after_step_job();  // this projection's part of after_steps_of
  Tensor backbone() const { return wm_.slice(0, out_); }
  // forward's work; y null: only what backward reads (O_A), no frozen product.
  void forward_parts(const Tensor& x, Tensor* y, LinearSaved* saved, SharedInput* shared);
  Tensor adapter_codes() const { return wm_.slice(out_, rank_); }

  std::string name_;
  FalqonOptions opt_;
  int64_t out_, in_;
  int rank_;
  Tensor wm_;       // F8_E4M3 [(out+r), in]: backbone rows, then A's rows
  Tensor scale_;    // F32 [1] on the device: s_w
  Tensor changed_;  // U8 [out]: rows whose codes some update changed
  Tensor applied_;  // F32 [out, r]: ΣΔB_applied
  Tensor scores_, topk_;  // after_step scratch: F32 [out], I32 [k]
  Tensor a_hat_, b_hat_;  // F32 on the CPU: the SVD factors Â [r, in], B̂ [out, r]
  Param b_;
  Tensor wt_;  // F8_E4M3 [in, out]: the backbone's codes transposed (keep), else undefined
  std::shared_ptr<quant::TransposeScratch> scratch_;  // else W's codes transposed for each dX GEMM
};

}  // namespace loft
