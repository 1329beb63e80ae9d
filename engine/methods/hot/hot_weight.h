// HOT's frozen projection (docs/hot.md; Kim et al., CVPR 2025): the forward is the backbone's usual
// product (bf16 dense, FP8 E4M3 per tensor as HALO level 0, or NF4-DQ decoded per GEMM, as in
// QLoRA), and the dX product is Hadamard-quantized: dX = Q(dY·H_b)·Q(H_bᵀ·W) ÷ b, H_b a block
// Walsh–Hadamard of b = 16 along `out`, both operands INT4 (or INT8), int32 accumulation
// (engine/methods/hot/hot_quant.h, hot_gemm.h). LoRA's own products and gradients stay exact
// (LoraLinear around this weight). Not registered as a method here: hot_weight() is what a
// method's linear factory calls (engine/methods/hot/hot_spec.cpp).
#pragma once
#include <cstdint>
#include <string>

#include "engine/methods/hot/hot_gemm.h"
#include "engine/methods/hot/hot_lqs.h"
#include "engine/peft/frozen_weight.h"
#include "engine/peft/weight_source.h"

namespace loft {

enum class HotBackbone : uint8_t { Dense, Fp8, Nf4 };

struct HotOptions {
  int gx_bits = 4;                                            // --hot-gx-bits 4|8 (dY and W codes)
  bool lqs = false;                                           // --hot-lqs: per-layer scale choice
  int lqs_batches = 1;                                        // --hot-lqs-batches: LQS's calibration
  quant::HotRound round = quant::HotRound::Stochastic;        // --hot-round sr|rne
  HotBackbone backbone = HotBackbone::Dense;                  // --backbone dense|fp8|nf4
  uint64_t seed = 0;                                          // the SR key (the run's seed)
  quant::HotGemmPath gemm = quant::HotGemmPath::Auto;         // tests and benchmarks pin a path
};

// "dense", "fp8", "nf4"; "sr", "rne": UsageError naming the option otherwise.
HotBackbone parse_hot_backbone(const std::string& name);
const char* hot_backbone_name(HotBackbone b);
quant::HotRound parse_hot_round(const std::string& name);
const char* hot_round_name(quant::HotRound r);
// UsageError unless 4 or 8.
void check_hot_gx_bits(int bits);

// Where a projection sits, for the SR counter: "model.layers.3.mlp.up_proj" -> {3, 5} (q, k, v,
// o, gate, up, down = 0..6). Error for a name without a layer index or a known projection.
struct HotSite {
  uint32_t layer = 0, proj = 0;
};
HotSite hot_site_of(const std::string& module_name);

class HotWeight final : public FrozenWeight {
 public:
  HotWeight(const WeightSource& weight, const HotOptions& opt, HotSite site);

  int64_t out_features() const override { return base_->out_features(); }
  int64_t in_features() const override { return base_->in_features(); }
  DType compute_dtype() const override { return base_->compute_dtype(); }
  Device device() const override { return base_->device(); }
  Tensor materialize() const override { return base_->materialize(); }
  size_t stored_bytes() const override;
  std::vector<Tensor*> stored_tensors() override;
  void forward(const Tensor& x, Tensor& y, SharedInput* shared) const override {
    base_->forward(x, y, shared);
  }
  // The HOT product (exact while calibrating, which also measures LQS's errors). Each call outside
  // calibration uses the next micro-step of the SR counter.
  void backward_input(const Tensor& dy, Tensor& dx, bool accumulate) const override;

  // LQS: between begin and end, backward_input is the backbone's exact product and each call adds
  // the dY's errors under both scale choices (RNG stream kStreamLqs, counter step = batch index);
  // end picks the scale (docs/hot.md §8.1.7) and returns it.
  void begin_calibration();
  quant::HotScale end_calibration();
  const quant::HotLqsErrors& lqs_errors() const { return lqs_; }
  // The dY scale in use (per token unless LQS chose per tensor); load_method_state restores it.
  quant::HotScale scale() const { return scale_; }
  // The SR counter's micro-step: the number of HOT backward calls so far; load_method_state restores it.
  uint32_t micro_step() const { return step_; }

  // FrozenWeight's hooks. Calibration is LQS's (lqs_batches micro-batches when opt.lqs, else
  // none); the method state is what an exact resume restores: "hot_micro_step" (I32 [1], the
  // counter's bits) and "hot_scale" (I32 [1]: 0 per token, 1 per tensor).
  int calibration_batches() const override { return opt_.lqs ? opt_.lqs_batches : 0; }
  void start_calibration() override { begin_calibration(); }
  void finish_calibration() override { end_calibration(); }
  std::map<std::string, Tensor> method_state() const override;
  void load_method_state(const std::map<std::string, Tensor>& state) override;
  const HotOptions& options() const { return opt_; }

 private:
  quant::HotCodes weight_codes() const;

  std::unique_ptr<FrozenWeight> base_;
  HotOptions opt_;
  HotSite site_;
  quant::HotGemmPath path_;
  quant::HotCodes w_;  // cached W codes (dense/fp8 backbones); NF4 regenerates them per call
  quant::HotScale scale_ = quant::HotScale::PerToken;
  bool calibrating_ = false;
  mutable quant::HotLqsErrors lqs_;
  mutable uint32_t step_ = 0;
};

std::unique_ptr<HotWeight> hot_weight(const WeightSource& weight, const HotOptions& opt,
                                      HotSite site);

}  // namespace loft
