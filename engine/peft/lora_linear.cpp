#include "engine/peft/lora_linear.h"

#include <cmath>

#include "engine/device/profile.h"
#include "engine/ops/ops.h"

namespace loft {

LoraLinear::LoraLinear(std::string name, std::unique_ptr<FrozenWeight> weight,
                       const LoraOptions& opt, std::mt19937_64& rng)
    : weight_(std::move(weight)), opt_(opt) {
  LOFT_CHECK(opt.rank > 0, "LoRA rank must be positive, got ", opt.rank);
  const Device dev = weight_->device();
  const int64_t in = weight_->in_features(), out = weight_->out_features(), r = opt.rank;
  a_ = {name + ".lora_A", Tensor::zeros({r, in}, DType::F32, dev),
        Tensor::zeros({r, in}, DType::F32, dev)};
  b_ = {name + ".lora_B", Tensor::zeros({out, r}, DType::F32, dev),
        Tensor::zeros({out, r}, DType::F32, dev)};
  const float bound = 1.0f / std::sqrt(float(in));
  std::uniform_real_distribution<float> dist(-bound, bound);
  std::vector<float> a(size_t(r * in));
  for (float& v : a) v = dist(rng);
  a_.value.copy_from(Tensor::from_vector(a, {r, in}));
  refresh_copies();
}

void LoraLinear::set_adapter(const Tensor& a, const Tensor& b) {
  LOFT_CHECK(a.shape() == a_.value.shape(), a_.name, ": adapter tensor is ", shape_str(a.shape()),
             ", expected ", shape_str(a_.value.shape()));
  LOFT_CHECK(b.shape() == b_.value.shape(), b_.name, ": adapter tensor is ", shape_str(b.shape()),
             ", expected ", shape_str(b_.value.shape()));
  a_.value.copy_from(a);
  b_.value.copy_from(b);
  refresh_copies();
}

void LoraLinear::refresh_copies() {
  const DType dt = weight_->compute_dtype();
  if (dt == DType::F32) return;  // the GEMMs read the masters themselves
  for (Param* p : {&a_, &b_}) {
    if (!p->copy.defined()) p->copy = Tensor::empty(p->value.shape(), dt, weight_->device());
    ops::convert(p->value, p->copy);
  }
}

// The optimizer's step has written the copies with the update (Param::copy): 448 conversions a
// step at 7B were ~1 ms of launches. Otherwise (values set by hand, another update) refresh here.
void LoraLinear::after_step() {
  if (!a_.copy_written || !b_.copy_written) refresh_copies();
  a_.copy_written = b_.copy_written = false;
}

void LoraLinear::forward(const Tensor& x, Tensor& y, LinearSaved* saved, SharedInput* shared) {
  const int64_t t = x.size(0);
  Tensor xa = Tensor::empty({t, opt_.rank}, x.dtype(), x.device());
  // When the frozen GEMM can add onto y in its epilogue, LoRA's term goes first: y is then
  // written once by the skinny GEMM and read inside the compute-bound one, instead of a second
  // skinny GEMM reading and writing all of y.
  const bool fused = weight_->gemm_accumulates();
  if (!fused) {
    prof::Scope scope(prof::Part::FrozenGemm);
    weight_->forward(x, y, shared);
  }
  {
    prof::Scope scope(prof::Part::AdapterMath);
    ops::gemm(x, compute(a_), xa, {.trans_b = true});
    ops::gemm(xa, compute(b_), y,
              {.trans_b = true, .alpha = opt_.scaling(), .beta = fused ? 0.0f : 1.0f});
  }
  if (fused) {
    prof::Scope scope(prof::Part::FrozenGemm);
    weight_->forward_add(x, y, shared);
  }
  if (saved) saved->tensors = {x, xa};
}

void LoraLinear::save_for_backward(const Tensor& x, LinearSaved& saved, SharedInput*) {
  // Backward reads x and x·Aᵀ only (the frozen store's backward needs dy alone).
  Tensor xa = Tensor::empty({x.size(0), opt_.rank}, x.dtype(), x.device());
  {
    prof::Scope scope(prof::Part::AdapterMath);
    ops::gemm(x, compute(a_), xa, {.trans_b = true});
  }
  saved.tensors = {x, xa};
}

void LoraLinear::backward(const Tensor& dy, const LinearSaved& saved, Tensor& dx,
                          bool accumulate_dx, const Tensor*) {
  LOFT_CHECK(saved.tensors.size() == 2, a_.name, ": backward without a saved forward");
  const Tensor& x = saved.tensors[0];
  const Tensor& xa = saved.tensors[1];
  const float s = opt_.scaling();
  // dB += s · dyᵀ·(x·Aᵀ);  g = dy·B;  dA += s · gᵀ·x;  dx (+)= dy·W + s · g·A.
  Tensor g = Tensor::empty({dy.size(0), opt_.rank}, dy.dtype(), dy.device());
  {
    prof::Scope scope(prof::Part::AdapterMath);
    ops::gemm(dy, xa, b_.grad, {.trans_a = true, .alpha = s, .beta = 1.0f});
    ops::gemm(dy, compute(b_), g);
    ops::gemm(g, x, a_.grad, {.trans_a = true, .alpha = s, .beta = 1.0f});
  }
  const bool fused = weight_->gemm_accumulates();  // as in forward: LoRA's term first
  if (fused) {
    prof::Scope scope(prof::Part::AdapterMath);
    ops::gemm(g, compute(a_), dx, {.alpha = s, .beta = accumulate_dx ? 1.0f : 0.0f});
  }
  {
    prof::Scope scope(prof::Part::FrozenGemm);
    weight_->backward_input(dy, dx, fused || accumulate_dx);
  }
  if (!fused) {
    prof::Scope scope(prof::Part::AdapterMath);
    ops::gemm(g, compute(a_), dx, {.alpha = s, .beta = 1.0f});
  }
}

Tensor LoraLinear::merged_weight() const {
  Tensor merged = frozen_weight_f32(*weight_);  // a fresh host copy
  ops::gemm(b_.value.to(Device::cpu()), a_.value.to(Device::cpu()), merged,
            {.alpha = opt_.scaling(), .beta = 1.0f});
  return merged;
}

}  // namespace loft
