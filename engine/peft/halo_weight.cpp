#include "engine/peft/halo_weight.h"

#include "engine/device/profile.h"
#include "engine/ops/ops.h"
#include "engine/peft/shared_backward.h"
#include "engine/peft/shared_input.h"
#include "engine/quant/code_transpose.h"
#include "engine/quant/hadamard.h"
#include "engine/quant/lowp_gemm.h"
#include "engine/quant/nf4_lowp.h"
#include "engine/quant/rotate_quantize.h"
#include "engine/quant/transpose_scratch.h"

namespace loft {

namespace {

using prof::Part;

// dx = H_Tᵀ·prod·Hᵀ as far as `level` rotates (dropping level 2's padded token rows), or dx +=
// that when accumulate; prod may be dx itself below level 2 (then in place). Prod is clobbered.
// Free of the weight: a group's finish runs it after its projections' backwards.
void unrotate(int level, const quant::HadamardPlan& plan, const quant::HadamardPlan& tokens,
              Tensor& prod, Tensor& dx, bool accumulate) {
  Tensor out = accumulate ? prod : dx;
  {
    prof::Scope s(Part::QuantHadamard);
    if (level >= 2) {
      out = accumulate ? Tensor::empty(dx.shape(), dx.dtype(), dx.device()) : dx;
      quant::token_transform(tokens, prod, out, /*inverse=*/true);
      quant::hadamard_transform(plan, out, out, /*inverse=*/true);
    } else if (level == 1) {
      quant::hadamard_transform(plan, prod, out, /*inverse=*/true);
    } else {
      out = prod;
    }
  }
  if (accumulate) ops::axpy(1.0f, out, dx);
}

class HaloWeight final : public FrozenWeight {
 public:
  HaloWeight(const WeightSource& src, const HaloOptions& opt)
      : opt_(opt), dtype_(src.compute_dtype()), out_(src.out_features()), in_(src.in_features()) {
    if (opt.level < 0 || opt.level > 2)
      throw UsageError(cat("--halo-level ", opt.level, " is not one of 0, 1, 2"));
    if (opt.level >= 1) plan_ = quant::plan_for(in_);
    // Level 0 in E4M3 with dense codes is Q(W) per tensor: a per-tensor FP8 checkpoint's own codes
    // and scale are W exactly, so they are taken as they are.
    const bool direct = opt.level == 0 && opt.format == quant::LowpFormat::E4M3 && !nf4();
    if (auto q = direct ? src.e4m3_codes() : std::nullopt) {
      q_ = std::move(*q);
      keep_or_share_transpose();
      return;
    }
    const Tensor w = src.values();  // FP8 checkpoints: exact fp32, rotated and quantized from there
    Tensor wr = w;
    if (opt.level >= 1) {
      wr = Tensor::empty(w.shape(), w.dtype(), w.device());
      quant::hadamard_transform(plan_, w, wr);
    }
    if (nf4()) {
      nf4_ = quantize_nf4(wr);
      // Fixed once: max |deq| from the block absmaxes, so no GEMM needs an amax pass.
      const float s = quant::nf4_lowp_scale(nf4_, opt.format);
      q_.scale = Tensor::from_vector(std::vector<float>{s}, {1}).to(w.device());
      nf4_scale_ = s;
    } else {
      q_ = quant::quantize(wr, opt.format);
      keep_or_share_transpose();
    }
    q_.format = opt.format;
  }
  int64_t out_features() const override { return out_; }
  int64_t in_features() const override { return in_; }
  DType compute_dtype() const override { return dtype_; }
  Device device() const override { return q_.scale.device(); }
  size_t stored_bytes() const override {
    return nf4() ? nf4_.nbytes() + q_.scale.nbytes()
                 : q_.codes.nbytes() + q_.scale.nbytes() + (wt_.defined() ? wt_.nbytes() : 0);
  }
  std::vector<Tensor*> stored_tensors() override {
    if (nf4()) return {&nf4_.codes, &nf4_.absmax_codes, &nf4_.absmax_scale, &q_.scale};
    if (wt_.defined()) return {&q_.codes, &q_.scale, &wt_};
    return {&q_.codes, &q_.scale};
  }

  // The weight the GEMMs see, W ≈ deq(Q(W·H))·Hᵀ, in the compute dtype.
  Tensor materialize() const override {
    quant::QuantizedTensor q = q_;
    q.codes = weight_codes(/*transposed=*/false);
    Tensor w = quant::dequantize(q, dtype_);
    if (opt_.level >= 1) quant::hadamard_transform(plan_, w, w, /*inverse=*/true);
    return w;
  }

  void forward(const Tensor& x, Tensor& y, SharedInput* shared) const override {
    quant::QuantizedTensor own;
    const quant::QuantizedTensor* xq;
    {
      prof::Scope s(Part::QuantHadamard);
      // Projections of one input share its codes when they agree on rotation and format.
      const std::string key = cat("halo:", opt_.level >= 1 ? "rotated:" : "plain:",
                                  quant::format_name(opt_.format));
      xq = &quantized_input(shared, x, key, [&] {
        return opt_.level >= 1 ? quant::rotate_quantize(plan_, x, opt_.format)
                               : quant::quantize(x, opt_.format);
      }, own);
    }
    const Tensor wc = weight_codes(/*transposed=*/false);
    prof::Scope s(Part::FrozenGemm);
    quant::gemm_lowp(xq->codes, xq->scale, wc, q_.scale, y);
  }

  void backward_input(const Tensor& dy, Tensor& dx, bool accumulate) const override {
    const quant::HadamardPlan tokens = token_plan_for(dy);
    const quant::QuantizedTensor dyq = quantize_dy(dy, tokens);
    // The product lands in dx unless it needs un-padding along tokens or adding to dx.
    const bool direct = opt_.level < 2 && !accumulate;
    Tensor prod = direct ? dx : Tensor::empty({dyq.codes.size(0), in_}, dx.dtype(), dx.device());
    product(dyq, prod, 0.0f);
    unrotate(opt_.level, plan_, tokens, prod, dx, accumulate);
  }

  // Rotated levels: the inverse rotations are linear, so the group's products (q, k, v; gate, up)
  // are summed by their GEMMs (beta = 1) into one scratch and rotated back once, at the finish.
  bool backward_input_grouped(const Tensor& dy, Tensor& dx, bool accumulate,
                              SharedBackward& group) const override {
    if (opt_.level < 1) return false;
    const quant::HadamardPlan tokens = token_plan_for(dy);
    const quant::QuantizedTensor dyq = quantize_dy(dy, tokens);
    const std::string key = cat("halo:dx:level", opt_.level, ":", in_);
    bool first = false;
    Tensor sum = group.scratch(key, [&] {
      first = true;
      return Tensor::empty({dyq.codes.size(0), in_}, dx.dtype(), dx.device());
    });
    LOFT_CHECK(first || accumulate, "HALO: a projection after the first of its group overwrites dx");
    LOFT_CHECK(sum.size(0) == dyq.codes.size(0) && sum.dtype() == dx.dtype(),
               "HALO: the group's products ", sum.str(), " do not match this one's rows ",
               dyq.codes.size(0), " and dtype");
    product(dyq, sum, first ? 0.0f : 1.0f);
    if (first)  // by value: the finish may come after this weight is gone
      group.at_finish(key, [level = opt_.level, plan = plan_, tokens, sum, accumulate](Tensor& dx_all) mutable {
        prof::Scope s(Part::FrozenGemm);
        unrotate(level, plan, tokens, sum, dx_all, accumulate);
      });
    return true;
  }

 private:
  bool nf4() const { return opt_.backbone == HaloBackbone::Nf4; }

  // Level 2 rotates dY along tokens too (blocks of its token count); below, no plan.
  quant::HadamardPlan token_plan_for(const Tensor& dy) const {
    return opt_.level >= 2 ? quant::token_plan(dy.size(0)) : quant::HadamardPlan{};
  }

  // Q(dY), or at level 2 Q(H_T·dY) [tokens.n, out].
  quant::QuantizedTensor quantize_dy(const Tensor& dy, const quant::HadamardPlan& tokens) const {
    prof::Scope s(Part::QuantHadamard);
    return opt_.level >= 2 ? quant::token_rotate_quantize(tokens, dy, opt_.format)
                           : quant::quantize(dy, opt_.format);
  }

  // c = Q(dY)·Q(W·H) + beta·c: [rows, out] · [in, out]ᵀ, the transposed weight codes keeping both
  // operands K-major.
  void product(const quant::QuantizedTensor& dyq, Tensor& c, float beta) const {
    const Tensor wct = weight_codes(/*transposed=*/true);
    prof::Scope s(Part::FrozenGemm);
    quant::gemm_lowp(dyq.codes, dyq.scale, wct, q_.scale, c, {.beta = beta});
  }

  // Dense codes: their transpose kept (--halo-transposed keep) or made per backward in the device's
  // shared scratch.
  void keep_or_share_transpose() {
    if (opt_.transposed == TransposedCodes::keep) wt_ = quant::transpose_codes(q_.codes);
    else scratch_ = quant::TransposeScratch::of(device());
  }

  // W·H codes [out, in], or their transpose: resident (the transpose made in the shared scratch
  // now, valid until the next one), or decoded from NF4 now (a temporary).
  Tensor weight_codes(bool transposed) const {
    if (!nf4() && !transposed) return q_.codes;
    if (wt_.defined()) return wt_;
    prof::Scope s(Part::QuantHadamard);
    if (!nf4()) return scratch_->transposed(q_.codes);
    Tensor c = Tensor::empty(transposed ? Shape{in_, out_} : Shape{out_, in_},
                             quant::code_dtype(opt_.format), q_.scale.device());
    quant::nf4_to_lowp(nf4_, nf4_scale_, transposed, c);
    return c;
  }

  HaloOptions opt_;
  DType dtype_;
  int64_t out_, in_;
  quant::HadamardPlan plan_;
  quant::QuantizedTensor q_;  // dense: codes and scale; nf4: the fixed scale only
  std::shared_ptr<quant::TransposeScratch> scratch_;  // dense, per step: W·H's codes transposed for dX
  Tensor wt_;                                         // dense, kept: W·H's codes transposed [in, out]
  Nf4Tensor nf4_;
  float nf4_scale_ = 1.0f;
};

}  // namespace

std::unique_ptr<FrozenWeight> halo_weight(const WeightSource& weight, const HaloOptions& opt) {
  return std::make_unique<HaloWeight>(weight, opt);
}

}  // namespace loft
