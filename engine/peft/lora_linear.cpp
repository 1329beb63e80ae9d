#include "engine/peft/lora_linear.h"

#include <cmath>

#include "engine/device/profile.h"
#include "engine/ops/ops.h"
#include "engine/peft/shared_backward.h"
#include "engine/peft/shared_input.h"

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

// The group's A: one [Σr, in] matrix whose row blocks are its members' A (their Params' value,
// copy and grad are views of these).
struct LoraLinear::Group {
  Tensor value, copy, grad;  // F32 masters, compute-dtype copies (undefined on F32), F32 gradients
  std::string key;           // names the group's products in SharedInput and SharedBackward
  const Tensor& compute() const { return copy.defined() ? copy : value; }
};

void LoraLinear::group_with(const std::vector<AdaptedLinear*>& readers) {
  std::vector<LoraLinear*> members;
  for (AdaptedLinear* r : readers)
    if (auto* l = dynamic_cast<LoraLinear*>(r)) members.push_back(l);
  if (members.size() < 2 || members.front() != this || group_) return;
  int64_t rows = 0;
  for (LoraLinear* m : members) {
    if (m->group_ || m->in_features() != in_features() || m->opt_.scaling() != opt_.scaling() ||
        m->a_.copy.defined() != a_.copy.defined() ||
        (a_.copy.defined() && m->a_.copy.dtype() != a_.copy.dtype()) ||
        m->weight_->device() != weight_->device())
      return;
    rows += m->opt_.rank;
  }
  const Device dev = weight_->device();
  auto g = std::make_shared<Group>();
  g->value = Tensor::empty({rows, in_features()}, DType::F32, dev);
  g->grad = Tensor::empty({rows, in_features()}, DType::F32, dev);
  if (a_.copy.defined()) g->copy = Tensor::empty({rows, in_features()}, a_.copy.dtype(), dev);
  g->key = "lora-group:" + a_.name;
  int64_t row = 0;
  for (LoraLinear* m : members) {
    const int64_t r = m->opt_.rank;
    for (auto [whole, part] : {std::pair{&g->value, &m->a_.value}, std::pair{&g->grad, &m->a_.grad},
                               std::pair{&g->copy, &m->a_.copy}}) {
      if (!whole->defined()) continue;
      Tensor view = whole->slice(row, r);
      view.copy_from(*part);
      *part = view;
    }
    m->group_ = g;
    m->group_row_ = row;
    row += r;
  }
}

Tensor LoraLinear::ut_of(const Tensor& x, SharedInput* shared) {
  const int64_t t = x.size(0);
  if (group_ && shared) {
    shared->check_is_input(x);
    const Tensor& all = shared->derived(group_->key, [&] {
      Tensor u = Tensor::empty({group_->value.size(0), t}, x.dtype(), x.device());
      ops::gemm(group_->compute(), x, u, {.trans_b = true});  // [Σr, in]·[T, in]ᵀ
      return u;
    });
    return all.slice(group_row_, opt_.rank);
  }
  Tensor ut = Tensor::empty({opt_.rank, t}, x.dtype(), x.device());
  ops::gemm(compute(a_), x, ut, {.trans_b = true});
  return ut;
}

void LoraLinear::forward(const Tensor& x, Tensor& y, LinearSaved* saved, SharedInput* shared) {
  // When the frozen GEMM can add onto y in its epilogue, LoRA's term goes first: y is then
  // written once by the skinny GEMM and read inside the compute-bound one, instead of a second
  // skinny GEMM reading and writing all of y.
  const bool fused = weight_->gemm_accumulates();
  if (!fused) {
    prof::Scope scope(prof::Part::FrozenGemm);
    weight_->forward(x, y, shared);
  }
  Tensor ut;
  {
    prof::Scope scope(prof::Part::AdapterMath);
    ut = ut_of(x, shared);
    ops::gemm(ut, compute(b_), y,
              {.trans_a = true, .trans_b = true, .alpha = opt_.scaling(), .beta = fused ? 0.0f : 1.0f});
  }
  if (fused) {
    prof::Scope scope(prof::Part::FrozenGemm);
    weight_->forward_add(x, y, shared);
  }
  if (saved) saved->tensors = {x, ut};
}

void LoraLinear::save_for_backward(const Tensor& x, LinearSaved& saved, SharedInput* shared) {
  // Backward reads x and (x·Aᵀ)ᵀ only (the frozen store's backward needs dy alone).
  prof::Scope scope(prof::Part::AdapterMath);
  saved.tensors = {x, ut_of(x, shared)};
}

void LoraLinear::backward(const Tensor& dy, const LinearSaved& saved, Tensor& dx,
                          bool accumulate_dx, const Tensor*, SharedBackward* shared) {
  LOFT_CHECK(saved.tensors.size() == 2, a_.name, ": backward without a saved forward");
  const Tensor& x = saved.tensors[0];
  const Tensor& ut = saved.tensors[1];  // (x·Aᵀ)ᵀ [r, T]
  const float s = opt_.scaling();
  const int64_t t = dy.size(0), r = opt_.rank;
  // dB += s·dyᵀ·(x·Aᵀ);  gᵀ = Bᵀ·dyᵀ;  dA += s·gᵀ·x;  dx (+)= dy·W + s·g·A.
  // Grouped, gᵀ goes into this projection's rows of the group's, whose dA and dx term are made
  // once, at the group's finish.
  const bool grouped = group_ && shared;
  Tensor all = grouped ? shared->scratch(group_->key, [&] {
    return Tensor::empty({group_->value.size(0), t}, dy.dtype(), dy.device());
  }) : Tensor();
  Tensor gt = grouped ? all.slice(group_row_, r) : Tensor::empty({r, t}, dy.dtype(), dy.device());
  {
    prof::Scope scope(prof::Part::AdapterMath);
    ops::gemm(dy, ut, b_.grad, {.trans_a = true, .trans_b = true, .alpha = s, .beta = 1.0f});
    ops::gemm(compute(b_), dy, gt, {.trans_a = true, .trans_b = true});
    if (!grouped) ops::gemm(gt, x, a_.grad, {.alpha = s, .beta = 1.0f});
  }
  if (grouped) {
    {
      // First, so that a store which defers its write of dx to the finish (HALO's one inverse
      // rotation of the group's summed products) queues it before the terms added below.
      prof::Scope scope(prof::Part::FrozenGemm);
      if (!weight_->backward_input_grouped(dy, dx, accumulate_dx, *shared))
        weight_->backward_input(dy, dx, accumulate_dx);
    }
    shared->at_finish(group_->key, [g = group_, all, x, s](Tensor& dx_all) {
      prof::Scope scope(prof::Part::AdapterMath);
      ops::gemm(all, x, g->grad, {.alpha = s, .beta = 1.0f});
      ops::gemm(all, g->compute(), dx_all, {.trans_a = true, .alpha = s, .beta = 1.0f});
    });
    return;
  }
  const bool fused = weight_->gemm_accumulates();  // as in forward: LoRA's term first
  if (fused) {
    prof::Scope scope(prof::Part::AdapterMath);
    ops::gemm(gt, compute(a_), dx, {.trans_a = true, .alpha = s, .beta = accumulate_dx ? 1.0f : 0.0f});
  }
  {
    prof::Scope scope(prof::Part::FrozenGemm);
    weight_->backward_input(dy, dx, fused || accumulate_dx);
  }
  if (!fused) {
    prof::Scope scope(prof::Part::AdapterMath);
    ops::gemm(gt, compute(a_), dx, {.trans_a = true, .alpha = s, .beta = 1.0f});
  }
}

Tensor LoraLinear::merged_weight() const {
  Tensor merged = frozen_weight_f32(*weight_);  // a fresh host copy
  ops::gemm(b_.value.to(Device::cpu()), a_.value.to(Device::cpu()), merged,
            {.alpha = opt_.scaling(), .beta = 1.0f});
  return merged;
}

}  // namespace loft
