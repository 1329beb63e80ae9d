#include "engine/peft/nf4_weight.h"

#include "engine/device/profile.h"
#include "engine/ops/ops.h"

namespace loft {

namespace {
class Nf4Weight final : public FrozenWeight {
 public:
  explicit Nf4Weight(const Tensor& w)
      : q_(quantize_nf4(w)), dtype_(w.dtype()), out_(w.size(0)), in_(w.size(1)) {}
  int64_t out_features() const override { return out_; }
  int64_t in_features() const override { return in_; }
  DType compute_dtype() const override { return dtype_; }
  Device device() const override { return q_.device(); }
  Tensor materialize() const override {
    Tensor w = Tensor::empty({out_, in_}, dtype_, q_.device());
    dequantize_nf4_into(q_, w);
    return w;
  }
  size_t stored_bytes() const override { return q_.nbytes(); }
  std::vector<Tensor*> stored_tensors() override {
    return {&q_.codes, &q_.absmax_codes, &q_.absmax_scale};
  }

  // The base products, with the decode and the GEMM charged to their own profile parts.
  void forward(const Tensor& x, Tensor& y, SharedInput*) const override {
    const Tensor w = decoded();
    prof::Scope s(prof::Part::FrozenGemm);
    ops::gemm(x, w, y, {.trans_b = true});
  }
  void forward_add(const Tensor& x, Tensor& y, SharedInput*) const override {
    const Tensor w = decoded();
    prof::Scope s(prof::Part::FrozenGemm);
    ops::gemm(x, w, y, {.trans_b = true, .beta = 1.0f});
  }
  bool gemm_accumulates() const override { return true; }
  void backward_input(const Tensor& dy, Tensor& dx, bool accumulate) const override {
    const Tensor w = decoded();
    prof::Scope s(prof::Part::FrozenGemm);
    ops::gemm(dy, w, dx, {.beta = accumulate ? 1.0f : 0.0f});
  }

 private:
  Tensor decoded() const {
    prof::Scope s(prof::Part::QuantHadamard);
    return materialize();
  }

  Nf4Tensor q_;
  DType dtype_;
  int64_t out_, in_;
};
}  // namespace

std::unique_ptr<FrozenWeight> nf4_weight(Tensor weight) {
  LOFT_CHECK(weight.dim() == 2, "NF4 weight must be [out, in], got ", weight.str());
  return std::make_unique<Nf4Weight>(weight);
}

}  // namespace loft
