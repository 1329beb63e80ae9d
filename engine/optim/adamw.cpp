#include "engine/optim/adamw.h"

#include <map>

#include "engine/device/profile.h"

namespace loft {

AdamW::AdamW(std::vector<Param*> params, AdamWConfig config)
    : params_(std::move(params)), config_(config) {
  for (Param* p : params_) {
    tensors_.m.push_back(Tensor::zeros(p->value.shape(), DType::F32, p->value.device()));
    tensors_.v.push_back(Tensor::zeros(p->value.shape(), DType::F32, p->value.device()));
  }
  const Device device = params_.empty() ? Device::cpu() : params_.front()->value.device();
  grad_scale_ = Tensor::empty({1}, DType::F32, device);
}

// The params' tensors as they are now (a method may have replaced one), as every step read them.
void AdamW::refresh_lists() {
  tensors_.params.clear();
  tensors_.grads.clear();
  tensors_.copies.clear();
  for (Param* p : params_) {
    tensors_.params.push_back(p->value);
    tensors_.grads.push_back(p->grad);
    tensors_.copies.push_back(p->copy);
  }
}

double AdamW::clip_grad_norm(double max_norm) {
  prof::Scope scope(prof::Part::Optimizer);
  refresh_lists();
  const double norm = ops::grad_norm_clip(tensors_, max_norm, grad_scale_);
  clip_pending_ = max_norm > 0;
  return norm;
}

void AdamW::step(double lr) {
  prof::Scope scope(prof::Part::Optimizer);
  ++step_;
  const ops::AdamWStep s{lr, config_.beta1, config_.beta2, config_.eps, config_.weight_decay, step_};
  refresh_lists();
  ops::adamw_all(tensors_, clip_pending_ ? &grad_scale_ : nullptr, s);
  for (Param* p : params_) p->copy_written = p->copy.defined();
  clip_pending_ = false;
}

std::vector<std::pair<std::string, Tensor>> AdamW::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back(params_[i]->name + ".exp_avg", tensors_.m[i]);
    out.emplace_back(params_[i]->name + ".exp_avg_sq", tensors_.v[i]);
  }
  return out;
}

void AdamW::load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                       int64_t steps_taken) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : tensors) by_name[name] = &t;
  for (size_t i = 0; i < params_.size(); ++i) {
    for (auto [suffix, dst] :
         {std::pair{".exp_avg", &tensors_.m[i]}, std::pair{".exp_avg_sq", &tensors_.v[i]}}) {
      const std::string name = params_[i]->name + suffix;
      auto it = by_name.find(name);
      if (it == by_name.end()) throw Error(cat("optimizer state: tensor ", name, " is missing"));
      if (it->second->shape() != dst->shape())
        throw Error(cat("optimizer state: tensor ", name, " is ", shape_str(it->second->shape()),
                        ", expected ", shape_str(dst->shape())));
      dst->copy_from(*it->second);
    }
  }
  step_ = steps_taken;
}

}  // namespace loft
