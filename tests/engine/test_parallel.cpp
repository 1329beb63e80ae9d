// parallel_for: every index exactly once, any thread count, and a thrown error reaches the caller.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "engine/core/parallel.h"

namespace loft {
namespace {

TEST(ParallelFor, VisitsEveryIndexOnce) {
  for (int threads : {0, 1, 3, 64}) {
    std::vector<std::atomic<int>> hits(1000);
    parallel_for(int64_t(hits.size()), [&](int64_t i) { hits[size_t(i)]++; }, threads);
    for (const auto& h : hits) ASSERT_EQ(h.load(), 1) << threads << " threads";
  }
  parallel_for(0, [](int64_t) { FAIL(); });
}

TEST(ParallelFor, RethrowsTheFirstError) {
  EXPECT_THROW(parallel_for(100, [](int64_t i) {
                 if (i == 37) throw std::runtime_error("bad 37");
               }, 4),
               std::runtime_error);
}

}  // namespace
}  // namespace loft
