#include "tests/common/thread_grad_sum.h"

#include <cstring>
#include <map>
#include <set>

namespace loft::test {

class ThreadGradSum::Rank final : public GradientSync {
 public:
  Rank(ThreadGradSum& all, int r) : all_(all), r_(r) {}
  void begin(std::span<Param* const>) override { at_ready_.clear(); }
  void ready(std::span<Param* const> params) override {
    for (Param* p : params) {
      LOFT_CHECK(!at_ready_.count(p), "ThreadGradSum: rank ", r_, ": ", p->name, " reported ready twice");
      at_ready_[p] = p->grad.to_float_vector();
    }
  }
  void sum(std::span<Param* const> params, std::span<float> scalars) override {
    check_ready(params);
    all_.meet(r_, {params, scalars, 0}, [](std::vector<Arrival>& a) {
      for (const Arrival& x : a)
        LOFT_CHECK(x.params.size() == a[0].params.size() && x.scalars.size() == a[0].scalars.size(),
                   "ThreadGradSum: the ranks passed different params or scalars");
      for (size_t p = 0; p < a[0].params.size(); ++p) {
        Tensor& g0 = a[0].params[p]->grad;
        for (int64_t k = 0; k < g0.numel(); ++k) {
          float s = 0;
          for (const Arrival& x : a) s += x.params[p]->grad.ptr<float>()[k];
          for (const Arrival& x : a) x.params[p]->grad.ptr<float>()[k] = s;
        }
      }
      for (size_t k = 0; k < a[0].scalars.size(); ++k) {
        float s = 0;
        for (const Arrival& x : a) s += x.scalars[k];
        for (const Arrival& x : a) x.scalars[k] = s;
      }
    });
  }
  std::vector<uint64_t> gather(uint64_t value) override {
    std::vector<uint64_t> out;
    all_.meet(r_, {{}, {}, value}, [&](std::vector<Arrival>& a) {
      all_.gathered_.clear();
      for (const Arrival& x : a) all_.gathered_.push_back(x.value);
    });
    std::lock_guard lock(all_.mu_);
    return all_.gathered_;
  }
  void abort() override { all_.abort_all(); }

 private:
  // Every gradient reported ready is one of `params` and still holds the bytes it had then.
  void check_ready(std::span<Param* const> params) {
    const std::set<const Param*> summed(params.begin(), params.end());
    for (const auto& [p, then] : at_ready_) {
      LOFT_CHECK(summed.count(p), "ThreadGradSum: rank ", r_, ": ", p->name, " reported ready but not summed");
      const std::vector<float> now = p->grad.to_float_vector();
      if (std::memcmp(now.data(), then.data(), now.size() * sizeof(float)) != 0)
        throw Error(cat("ThreadGradSum: rank ", r_, ": the gradient of ", p->name,
                        " changed after it was reported ready"));
    }
    at_ready_.clear();
  }

  ThreadGradSum& all_;
  int r_;
  std::map<const Param*, std::vector<float>> at_ready_;  // this step's ready gradients, as then
};

ThreadGradSum::ThreadGradSum(int world) : arrivals_(size_t(world)) {
  for (int r = 0; r < world; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r));
}

ThreadGradSum::~ThreadGradSum() = default;

GradientSync& ThreadGradSum::rank(int r) { return *ranks_[size_t(r)]; }

void ThreadGradSum::meet(int r, Arrival a, const std::function<void(std::vector<Arrival>&)>& reduce) {
  std::unique_lock lock(mu_);
  if (aborted_) throw Error(cat("rank ", r, ": the exchange was aborted"));
  arrivals_[size_t(r)] = a;
  const uint64_t gen = generation_;
  if (++arrived_ == world()) {
    reduce(arrivals_);
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
  if (generation_ == gen) throw Error(cat("rank ", r, ": the exchange was aborted"));
}

void ThreadGradSum::abort_all() {
  std::lock_guard lock(mu_);
  aborted_ = true;
  cv_.notify_all();
}

}  // namespace loft::test
