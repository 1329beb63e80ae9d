// A projection that is not adapted: y = x·Wᵀ, dx = dy·W, nothing to train.
#pragma once
#include "engine/ops/ops.h"
#include "engine/peft/adapted_linear.h"

namespace loft {

class FrozenLinear : public AdaptedLinear {
 public:
  explicit FrozenLinear(Tensor weight) : weight_(std::move(weight)) {}
  int64_t in_features() const override { return weight_.size(1); }
  int64_t out_features() const override { return weight_.size(0); }
  void forward(const Tensor& x, Tensor& y, LinearSaved* saved) override {
    ops::gemm(x, weight_, y, {.trans_b = true});
    if (saved) saved->clear();
  }
  void backward(const Tensor& dy, const LinearSaved&, Tensor& dx, bool accumulate_dx) override {
    ops::gemm(dy, weight_, dx, {.beta = accumulate_dx ? 1.0f : 0.0f});
  }
  std::vector<Param*> params() override { return {}; }
  Tensor merged_weight() const override {
    const Tensor w = weight_.to(Device::cpu());
    if (w.dtype() == DType::F32) return w;
    Tensor out = Tensor::empty(w.shape(), DType::F32);
    ops::convert(w, out);
    return out;
  }

 private:
  Tensor weight_;
};

}  // namespace loft
