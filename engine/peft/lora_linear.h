// LoRA on a frozen weight: y = x·Wᵀ + (α/r)·(x·Aᵀ)·Bᵀ. A [r, in] and B [out, r] are fp32 masters;
// the GEMMs read them in the compute dtype: on bf16 through Param::copy, which the optimizer writes
// with each update and refresh_copies() after values are set otherwise; on f32 (the CPU) the
// masters themselves. W comes from a FrozenWeight: dense (LoRA) or NF4-DQ (QLoRA), decoded per GEMM.
// See docs/methods.md, "LoRA (bf16 reference)" and "QLoRA baseline".
// The projections that read one input (q, k, v; gate, up) keep their A as row blocks of one
// [Σr, in] matrix (group_with): one GEMM then makes every member's (x·Aᵀ)ᵀ, kept in the input's
// SharedInput, and after the members' backwards one makes the group's dA and one its dx term
// (SharedBackward). Each member's A (master, copy, gradient) is a view of the group's; its own
// path (no SharedInput or SharedBackward given) works on that view alone.
#pragma once
#include <memory>
#include <random>
#include <vector>

#include "engine/peft/adapted_linear.h"
#include "engine/peft/frozen_weight.h"

namespace loft {

struct LoraOptions {
  int rank = 64;
  float alpha = 16.0f;
  float scaling() const { return alpha / float(rank); }
};

class LoraLinear : public AdaptedLinear {
 public:
  // `weight` [out, in] in the compute dtype on the compute device. A is Kaiming-uniform
  // (bound 1/sqrt(in), as PEFT's kaiming_uniform_(a=√5)), B is zero.
  LoraLinear(std::string name, std::unique_ptr<FrozenWeight> weight, const LoraOptions& opt,
             std::mt19937_64& rng);
  LoraLinear(std::string name, Tensor weight, const LoraOptions& opt, std::mt19937_64& rng)
      : LoraLinear(std::move(name), dense_weight(std::move(weight)), opt, rng) {}

  int64_t in_features() const override { return weight_->in_features(); }
  int64_t out_features() const override { return weight_->out_features(); }
  void forward(const Tensor& x, Tensor& y, LinearSaved* saved,
               SharedInput* shared = nullptr) override;
  void save_for_backward(const Tensor& x, LinearSaved& saved, SharedInput* shared) override;
  void backward(const Tensor& dy, const LinearSaved& saved, Tensor& dx, bool accumulate_dx,
                const Tensor* dy_amax = nullptr, SharedBackward* shared = nullptr) override;
  // Groups this projection with the other LoRA readers of its input when it is the first of them
  // and all take the same input width, scaling, dtype and device (else nothing is grouped).
  void group_with(const std::vector<AdaptedLinear*>& readers) override;
  bool grouped() const { return group_ != nullptr; }
  std::vector<Param*> params() override { return {&a_, &b_}; }
  void refresh_copies() override;
  void after_step() override;
  Tensor merged_weight() const override;
  std::optional<std::pair<Tensor, Tensor>> peft_pair() const override {
    return std::pair{a_.value.to(Device::cpu()), b_.value.to(Device::cpu())};
  }
  bool imports_peft_pair() const override { return true; }
  void import_peft_pair(const Tensor& a, const Tensor& b) override { set_adapter(a, b); }

  FrozenWeight* frozen_store() const override { return weight_.get(); }

  const LoraOptions& options() const { return opt_; }
  Param& lora_a() { return a_; }
  Param& lora_b() { return b_; }
  // Replaces A and B (e.g. from a PEFT adapter file); shapes must match. Values are host F32.
  void set_adapter(const Tensor& a, const Tensor& b);

 private:
  struct Group;  // lora_linear.cpp

  std::unique_ptr<FrozenWeight> weight_;
  LoraOptions opt_;
  Param a_, b_;
  std::shared_ptr<Group> group_;  // null: not grouped
  int64_t group_row_ = 0;         // this projection's first row in the group's A
  // A or B as the GEMMs read it: its compute-dtype copy, or the F32 master itself on F32.
  static const Tensor& compute(const Param& p) { return p.copy.defined() ? p.copy : p.value; }
  // uᵀ = (x·Aᵀ)ᵀ [r, T]: this projection's rows of the group's product (made once per input in
  // `shared`), or its own product.
  Tensor ut_of(const Tensor& x, SharedInput* shared);
};

}  // namespace loft
