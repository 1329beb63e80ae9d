// The profiler charges each interval to the innermost open scope (exclusive time) and the rest of
// the time to Other.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <thread>

#include "engine/device/profile.h"

namespace loft {
namespace {

void busy_for(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
  }
}

// One timed run of outer(10 ms, inner 20 ms, 10 ms) after 4 ms outside any scope.
std::array<double, prof::kParts> nested_run() {
  prof::start(Device::cpu());
  busy_for(0.004);  // Other
  {
    prof::Scope outer(prof::Part::Attention);
    busy_for(0.010);
    {
      prof::Scope inner(prof::Part::QuantHadamard);
      busy_for(0.020);
    }
    busy_for(0.010);
  }
  return prof::stop();
}

TEST(Profile, NestedScopesChargeExclusiveTime) {
  // Wall-clock time: on a loaded machine a preemption inside a scope inflates it, so the upper
  // bound (the inner 20 ms not charged to the outer scope) gets three tries.
  std::array<double, prof::kParts> t{};
  for (int attempt = 0; attempt < 3; ++attempt) {
    t = nested_run();
    if (t[int(prof::Part::Attention)] < 0.020 + 0.015) break;
  }
  EXPECT_FALSE(prof::active());
  const double att = t[int(prof::Part::Attention)], q = t[int(prof::Part::QuantHadamard)];
  EXPECT_GE(att, 0.020);
  EXPECT_LT(att, 0.020 + 0.015);  // the inner 20 ms is not charged to the outer scope
  EXPECT_GE(q, 0.020);
  EXPECT_GE(t[int(prof::Part::Other)], 0.004);
  EXPECT_EQ(t[int(prof::Part::FrozenGemm)], 0.0);
}

TEST(Profile, ScopesAreFreeWhenOff) {
  EXPECT_FALSE(prof::active());
  { prof::Scope s(prof::Part::Optimizer); }  // must not record or throw
  prof::start(Device::cpu());
  const auto t = prof::stop();
  EXPECT_EQ(t[int(prof::Part::Optimizer)], 0.0);
  EXPECT_STREQ(prof::part_name(prof::Part::FalqonUpdate), "falqon_update");
}

}  // namespace
}  // namespace loft
