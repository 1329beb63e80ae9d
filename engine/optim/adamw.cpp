#include "engine/optim/adamw.h"

#include <cmath>
#include <map>

#include "engine/device/profile.h"

namespace loft {

AdamW::AdamW(std::vector<Param*> params, AdamWConfig config)
    : params_(std::move(params)), config_(config) {
  for (Param* p : params_) {
    m_.push_back(Tensor::zeros(p->value.shape(), DType::F32, p->value.device()));
    v_.push_back(Tensor::zeros(p->value.shape(), DType::F32, p->value.device()));
  }
}

void AdamW::step(double lr) {
  prof::Scope scope(prof::Part::Optimizer);
  ++step_;
  const ops::AdamWStep s{lr, config_.beta1, config_.beta2, config_.eps, config_.weight_decay, step_};
  for (size_t i = 0; i < params_.size(); ++i) ops::adamw(params_[i]->value, params_[i]->grad, m_[i], v_[i], s);
}

void AdamW::zero_grad() {
  prof::Scope scope(prof::Part::Optimizer);
  for (Param* p : params_) p->grad.zero_();
}

std::vector<std::pair<std::string, Tensor>> AdamW::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back(params_[i]->name + ".exp_avg", m_[i]);
    out.emplace_back(params_[i]->name + ".exp_avg_sq", v_[i]);
  }
  return out;
}

void AdamW::load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                       int64_t steps_taken) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : tensors) by_name[name] = &t;
  for (size_t i = 0; i < params_.size(); ++i) {
    for (auto [suffix, dst] : {std::pair{".exp_avg", &m_[i]}, std::pair{".exp_avg_sq", &v_[i]}}) {
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

double grad_norm(const std::vector<Param*>& params) {
  prof::Scope scope(prof::Part::Optimizer);
  double s = 0;
  for (const Param* p : params) s += ops::sum_squares(p->grad);
  return std::sqrt(s);
}

double clip_grad_norm(const std::vector<Param*>& params, double max_norm) {
  prof::Scope scope(prof::Part::Optimizer);
  const double norm = grad_norm(params);
  if (max_norm > 0 && std::isfinite(norm)) {
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0)
      for (Param* p : params) ops::scale(p->grad, float(coef));
  }
  return norm;
}

}  // namespace loft
