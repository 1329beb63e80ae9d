// HotWeight: the backbone chosen by --backbone, its W codes, and the HOT dX product.
#include "engine/methods/hot/hot_weight.h"

#include <array>
#include <cstring>
#include <regex>

#include "engine/device/profile.h"
#include "engine/methods/hot/hot_numerics.h"
#include "engine/peft/halo_weight.h"
#include "engine/peft/nf4_weight.h"

namespace loft {

namespace {

using prof::Part;

std::unique_ptr<FrozenWeight> backbone(const WeightSource& src, HotBackbone b) {
  switch (b) {
    case HotBackbone::Dense:
      return dense_weight(src.dense());
    case HotBackbone::Nf4:
      return nf4_weight(src.dense());
    case HotBackbone::Fp8: {
      // HALO level 0 in E4M3: Q(X)·Q(W)ᵀ per tensor, a per-tensor FP8 checkpoint's codes as they are.
      HaloOptions h;
      h.level = 0;
      h.format = quant::LowpFormat::E4M3;
      return halo_weight(src, h);
    }
  }
  throw Error("hot: unknown backbone");
}

}  // namespace

HotBackbone parse_hot_backbone(const std::string& name) {
  if (name == "dense") return HotBackbone::Dense;
  if (name == "fp8") return HotBackbone::Fp8;
  if (name == "nf4") return HotBackbone::Nf4;
  throw UsageError(cat("--backbone '", name, "' is not one of dense, fp8, nf4"));
}

const char* hot_backbone_name(HotBackbone b) {
  switch (b) {
    case HotBackbone::Dense:
      return "dense";
    case HotBackbone::Fp8:
      return "fp8";
    case HotBackbone::Nf4:
      return "nf4";
  }
  return "?";
}

quant::HotRound parse_hot_round(const std::string& name) {
  if (name == "sr") return quant::HotRound::Stochastic;
  if (name == "rne") return quant::HotRound::Nearest;
  throw UsageError(cat("--hot-round '", name, "' is not one of sr, rne"));
}

const char* hot_round_name(quant::HotRound r) {
  return r == quant::HotRound::Stochastic ? "sr" : "rne";
}

void check_hot_gx_bits(int bits) {
  if (bits != 4 && bits != 8) throw UsageError(cat("--hot-gx-bits ", bits, " is not one of 4, 8"));
}

HotSite hot_site_of(const std::string& module_name) {
  static const std::regex re(R"((?:^|\.)layers\.(\d+)\.(?:[a-z_]+\.)?([a-z]+_proj)$)");
  static const std::array<const char*, 7> projs = {"q_proj",    "k_proj", "v_proj",   "o_proj",
                                                   "gate_proj", "up_proj", "down_proj"};
  std::smatch m;
  if (std::regex_search(module_name, m, re)) {
    for (size_t p = 0; p < projs.size(); ++p)
      if (m[2] == projs[p]) return {uint32_t(std::stoul(m[1])), uint32_t(p)};
  }
  throw Error(cat("hot: no layer index and projection in module name '", module_name, "'"));
}

HotWeight::HotWeight(const WeightSource& weight, const HotOptions& opt, HotSite site)
    : base_(backbone(weight, opt.backbone)), opt_(opt), site_(site) {
  check_hot_gx_bits(opt.gx_bits);
  LOFT_CHECK(site.layer < (1u << 24) && site.proj < 16, "hot: site (layer ", site.layer, ", proj ",
             site.proj, ") does not fit the RNG counter");
  path_ = quant::hot_resolve_path(opt.gemm, base_->device());
  if (path_ == quant::HotGemmPath::S4 && opt.gx_bits != 4) path_ = quant::HotGemmPath::Int8;
  if (opt.backbone != HotBackbone::Nf4) w_ = weight_codes();  // NF4 keeps only its 4.127 bits
}

quant::HotCodes HotWeight::weight_codes() const {
  prof::Scope s(Part::QuantHadamard);
  quant::HotCodes w = quant::hot_weight_codes(base_->materialize(), opt_.gx_bits);
  if (path_ == quant::HotGemmPath::S4) {
    w.packed = quant::hot_pack_s4(w.codes);
    w.codes = Tensor();  // the s4 kernel reads only the packed codes
  }
  return w;
}

size_t HotWeight::stored_bytes() const {
  size_t b = base_->stored_bytes();
  for (const Tensor* t : {&w_.codes, &w_.packed, &w_.scale})
    if (t->defined()) b += t->nbytes();
  return b;
}

std::vector<Tensor*> HotWeight::stored_tensors() {
  std::vector<Tensor*> out = base_->stored_tensors();
  if (out.empty()) return out;
  for (Tensor* t : {&w_.codes, &w_.packed, &w_.scale})
    if (t->defined()) out.push_back(t);
  return out;
}

void HotWeight::backward_input(const Tensor& dy, Tensor& dx, bool accumulate) const {
  quant::HotQuantOptions q;
  q.bits = opt_.gx_bits;
  q.round = opt_.round;
  q.seed = opt_.seed;
  if (calibrating_) {
    q.step = uint32_t(lqs_.batches);
    q.site = quant::hot_site(site_.layer, site_.proj, quant::hot::kStreamLqs);
    {
      prof::Scope s(Part::QuantHadamard);
      quant::hot_lqs_accumulate(dy, q, lqs_);
    }
    base_->backward_input(dy, dx, accumulate);
    return;
  }
  q.scale = scale_;
  q.step = step_++;
  q.site = quant::hot_site(site_.layer, site_.proj, quant::hot::kStreamGx);
  quant::HotCodes dyq;
  {
    prof::Scope s(Part::QuantHadamard);
    dyq = quant::hot_quantize_dy(dy, q);
  }
  const quant::HotCodes w = w_.scale.defined() ? w_ : weight_codes();
  prof::Scope s(Part::FrozenGemm);
  const Tensor acc = quant::hot_igemm(dyq, w, path_);
  quant::hot_epilogue(acc, dyq, w, nullptr, dx, accumulate);
}

void HotWeight::begin_calibration() {
  calibrating_ = true;
  lqs_ = {};
}

quant::HotScale HotWeight::end_calibration() {
  calibrating_ = false;
  if (lqs_.batches > 0) scale_ = quant::hot_lqs_choice(lqs_);
  return scale_;
}

std::map<std::string, Tensor> HotWeight::method_state() const {
  int32_t step;
  std::memcpy(&step, &step_, sizeof step);
  return {{"hot_micro_step", Tensor::from_vector(std::vector<int32_t>{step}, {1})},
          {"hot_scale", Tensor::from_vector(std::vector<int32_t>{scale_ == quant::HotScale::PerTensor}, {1})}};
}

void HotWeight::load_method_state(const std::map<std::string, Tensor>& state) {
  auto get = [&](const std::string& key) -> int32_t {
    auto it = state.find(key);
    if (it == state.end()) throw Error(cat("HOT state has no ", key));
    const Tensor t = it->second.to(Device::cpu());
    LOFT_CHECK(t.dtype() == DType::I32 && t.numel() == 1, key, " is ", t.str(), ", expected I32 [1]");
    return t.ptr<int32_t>()[0];
  };
  const int32_t step = get("hot_micro_step"), scale = get("hot_scale");
  LOFT_CHECK(scale == 0 || scale == 1, "hot_scale is ", scale, ", expected 0 (per token) or 1 (per tensor)");
  std::memcpy(&step_, &step, sizeof step);
  scale_ = scale ? quant::HotScale::PerTensor : quant::HotScale::PerToken;
}

std::unique_ptr<HotWeight> hot_weight(const WeightSource& weight, const HotOptions& opt,
                                      HotSite site) {
  return std::make_unique<HotWeight>(weight, opt, site);
}

}  // namespace loft
