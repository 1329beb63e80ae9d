#include "engine/peft/frozen_weight.h"

#include "engine/ops/ops.h"

namespace loft {

void FrozenWeight::forward(const Tensor& x, Tensor& y, SharedInput*) const {
  ops::gemm(x, materialize(), y, {.trans_b = true});
}

void FrozenWeight::forward_add(const Tensor& x, Tensor& y, SharedInput* shared) const {
  Tensor t = Tensor::empty(y.shape(), y.dtype(), y.device());
  forward(x, t, shared);
  ops::axpy(1.0f, t, y);
}

void FrozenWeight::backward_input(const Tensor& dy, Tensor& dx, bool accumulate) const {
  ops::gemm(dy, materialize(), dx, {.beta = accumulate ? 1.0f : 0.0f});
}

namespace {
class DenseWeight final : public FrozenWeight {
 public:
  explicit DenseWeight(Tensor w) : w_(std::move(w)) {
    LOFT_CHECK(w_.dim() == 2, "frozen weight must be [out, in], got ", w_.str());
  }
  int64_t out_features() const override { return w_.size(0); }
  int64_t in_features() const override { return w_.size(1); }
  DType compute_dtype() const override { return w_.dtype(); }
  Device device() const override { return w_.device(); }
  Tensor materialize() const override { return w_; }
  size_t stored_bytes() const override { return w_.nbytes(); }
  std::vector<Tensor*> stored_tensors() override { return {&w_}; }
  void forward_add(const Tensor& x, Tensor& y, SharedInput*) const override {
    ops::gemm(x, w_, y, {.trans_b = true, .beta = 1.0f});
  }
  bool gemm_accumulates() const override { return true; }

 private:
  Tensor w_;
};
}  // namespace

std::unique_ptr<FrozenWeight> dense_weight(Tensor weight) {
  return std::make_unique<DenseWeight>(std::move(weight));
}

Tensor frozen_weight_f32(const FrozenWeight& fw) {
  const Tensor w = fw.materialize().to(Device::cpu());
  if (w.dtype() == DType::F32) return w;
  Tensor out = Tensor::empty(w.shape(), DType::F32);
  ops::convert(w, out);
  return out;
}

}  // namespace loft
