#include "engine/train/rank_workers.h"

#include <exception>
#include <thread>

#include "engine/device/memory.h"

namespace loft {

namespace {

// Lets the other ranks compute while this one waits in a collective (serial ranks only).
// begin() and ready() only queue work: the rank keeps its compute turn.
class SerialSync final : public ForwardingSync {
 public:
  SerialSync(GradientSync& inner, std::mutex& compute) : ForwardingSync(inner), compute_(compute) {}
  void sum(std::span<Param* const> params, std::span<float> scalars) override {
    Released r(compute_);
    inner_.sum(params, scalars);
  }
  std::vector<uint64_t> gather(uint64_t value) override {
    Released r(compute_);
    return inner_.gather(value);
  }

 private:
  struct Released {
    std::mutex& m;
    explicit Released(std::mutex& mu) : m(mu) { m.unlock(); }
    ~Released() { m.lock(); }
  };
  std::mutex& compute_;
};

}  // namespace

RankWorkers::RankWorkers(std::vector<Device> devices, bool serial)
    : devices_(std::move(devices)), serial_(serial) {
  LOFT_CHECK(!devices_.empty(), "RankWorkers: no rank");
}

GradientSync* RankWorkers::serialized(GradientSync* inner) {
  if (!serial_ || !inner) return inner;
  wrappers_.push_back(std::make_unique<SerialSync>(*inner, compute_));
  return wrappers_.back().get();
}

void RankWorkers::run(const std::function<void(size_t)>& work,
                      const std::function<void()>& on_failure) {
  if (devices_.size() == 1) {
    bind_thread(devices_[0]);
    work(0);
    return;
  }
  std::mutex mu;
  std::exception_ptr first;
  const auto one = [&](size_t i) {
    try {
      bind_thread(devices_[i]);
      std::unique_lock<std::mutex> turn(compute_, std::defer_lock);
      if (serial_) turn.lock();
      work(i);
    } catch (...) {
      bool was_first = false;
      {
        std::lock_guard lock(mu);
        if (!first) {
          first = std::current_exception();
          was_first = true;
        }
      }
      if (was_first && on_failure) on_failure();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(devices_.size());
  for (size_t i = 0; i < devices_.size(); ++i) threads.emplace_back(one, i);
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace loft
