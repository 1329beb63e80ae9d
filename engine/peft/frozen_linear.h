// A projection that is not adapted: y = x·Wᵀ, dx = dy·W, nothing to train.
#pragma once
#include "engine/device/profile.h"
#include "engine/ops/ops.h"
#include "engine/peft/adapted_linear.h"
#include "engine/peft/frozen_weight.h"

namespace loft {

class FrozenLinear : public AdaptedLinear {
 public:
  explicit FrozenLinear(std::unique_ptr<FrozenWeight> weight) : weight_(std::move(weight)) {}
  explicit FrozenLinear(Tensor weight) : FrozenLinear(dense_weight(std::move(weight))) {}
  int64_t in_features() const override { return weight_->in_features(); }
  int64_t out_features() const override { return weight_->out_features(); }
  void forward(const Tensor& x, Tensor& y, LinearSaved* saved,
               SharedInput* shared = nullptr) override {
    prof::Scope scope(prof::Part::FrozenGemm);
    weight_->forward(x, y, shared);
    if (saved) saved->clear();
  }
  void save_for_backward(const Tensor&, LinearSaved& saved, SharedInput*) override {
    saved.clear();  // dx = dy·W needs nothing of the forward
  }
  void backward(const Tensor& dy, const LinearSaved&, Tensor& dx, bool accumulate_dx,
                const Tensor* = nullptr, SharedBackward* = nullptr) override {
    prof::Scope scope(prof::Part::FrozenGemm);
    weight_->backward_input(dy, dx, accumulate_dx);
  }
  std::vector<Param*> params() override { return {}; }
  Tensor merged_weight() const override { return frozen_weight_f32(*weight_); }
  FrozenWeight* frozen_store() const override { return weight_.get(); }

 private:
  std::unique_ptr<FrozenWeight> weight_;
};

}  // namespace loft
