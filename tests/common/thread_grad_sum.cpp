#include "tests/common/thread_grad_sum.h"

namespace loft::test {

class ThreadGradSum::Rank final : public GradientSync {
 public:
  Rank(ThreadGradSum& all, int r) : all_(all), r_(r) {}
  void sum(std::span<Param* const> params, std::span<float> scalars) override {
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
  ThreadGradSum& all_;
  int r_;
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
