#include "engine/peft/halo_weight.h"

#include "engine/ops/ops.h"
#include "engine/quant/hadamard.h"
#include "engine/quant/lowp_gemm.h"

namespace loft {

namespace {
class HaloWeight final : public FrozenWeight {
 public:
  HaloWeight(const Tensor& w, const HaloOptions& opt)
      : opt_(opt), dtype_(w.dtype()), out_(w.size(0)), in_(w.size(1)) {
    LOFT_CHECK(opt.level == 0 || opt.level == 1, "--halo-level ", opt.level,
               " is not built (0 and 1 are; level 2 is pending)");
    if (opt.level >= 1) {
      plan_ = quant::plan_for(in_);
      Tensor wr = Tensor::empty(w.shape(), w.dtype(), w.device());
      quant::hadamard_transform(plan_, w, wr);
      q_ = quant::quantize(wr, opt.format, /*also_transposed=*/true);
    } else {
      q_ = quant::quantize(w, opt.format, /*also_transposed=*/true);
    }
  }
  int64_t out_features() const override { return out_; }
  int64_t in_features() const override { return in_; }
  DType compute_dtype() const override { return dtype_; }
  Device device() const override { return q_.codes.device(); }
  size_t stored_bytes() const override { return q_.codes.nbytes() + q_.codes_t.nbytes(); }

  // The weight the GEMMs see, W ≈ deq(Q(W·H))·Hᵀ, in the compute dtype.
  Tensor materialize() const override {
    Tensor w = quant::dequantize(q_, dtype_);
    if (opt_.level >= 1) quant::hadamard_transform(plan_, w, w, /*inverse=*/true);
    return w;
  }

  void forward(const Tensor& x, Tensor& y) const override {
    Tensor xr = x;
    if (opt_.level >= 1) {
      xr = Tensor::empty(x.shape(), x.dtype(), x.device());
      quant::hadamard_transform(plan_, x, xr);
    }
    const quant::QuantizedTensor xq = quant::quantize(xr, opt_.format);
    quant::gemm_lowp(xq.codes, xq.scale, q_.codes, q_.scale, y);
  }

  void backward_input(const Tensor& dy, Tensor& dx, bool accumulate) const override {
    const quant::QuantizedTensor dyq = quant::quantize(dy, opt_.format);
    Tensor out = accumulate ? Tensor::empty(dx.shape(), dx.dtype(), dx.device()) : dx;
    // [T, out] · [in, out]ᵀ: the transposed weight codes keep both operands K-major.
    quant::gemm_lowp(dyq.codes, dyq.scale, q_.codes_t, q_.scale, out);
    if (opt_.level >= 1) quant::hadamard_transform(plan_, out, out, /*inverse=*/true);
    if (accumulate) ops::axpy(1.0f, out, dx);
  }

 private:
  HaloOptions opt_;
  DType dtype_;
  int64_t out_, in_;
  quant::HadamardPlan plan_;
  quant::QuantizedTensor q_;
};
}  // namespace

std::unique_ptr<FrozenWeight> halo_weight(Tensor weight, const HaloOptions& opt) {
  LOFT_CHECK(weight.dim() == 2, "HALO weight must be [out, in], got ", weight.str());
  return std::make_unique<HaloWeight>(weight, opt);
}

}  // namespace loft
