#include "engine/train/schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/core/error.h"

namespace loft {
namespace {

TEST(Schedule, WarmupThenConstant) {
  LrSchedule s{ScheduleKind::Constant, 1e-3, 4, 100};
  EXPECT_DOUBLE_EQ(s.lr(0), 0.0);
  EXPECT_DOUBLE_EQ(s.lr(2), 0.5e-3);
  EXPECT_DOUBLE_EQ(s.lr(4), 1e-3);
  EXPECT_DOUBLE_EQ(s.lr(99), 1e-3);
}

TEST(Schedule, LinearDecaysToZeroAtTotal) {
  LrSchedule s{ScheduleKind::Linear, 2.0, 20, 120};
  EXPECT_DOUBLE_EQ(s.lr(10), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(20), 2.0);
  EXPECT_DOUBLE_EQ(s.lr(70), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(120), 0.0);
  EXPECT_DOUBLE_EQ(s.lr(200), 0.0);
}

TEST(Schedule, CosineHalfwayIsHalf) {
  LrSchedule s{ScheduleKind::Cosine, 1.0, 0, 10};
  EXPECT_DOUBLE_EQ(s.lr(0), 1.0);
  EXPECT_NEAR(s.lr(5), 0.5, 1e-12);
  EXPECT_NEAR(s.lr(10), 0.0, 1e-12);
  EXPECT_NEAR(s.lr(3), 0.5 * (1 + std::cos(M_PI * 0.3)), 1e-12);
}

TEST(Schedule, ParseRejectsUnknown) {
  EXPECT_EQ(parse_schedule("cosine"), ScheduleKind::Cosine);
  EXPECT_THROW(parse_schedule("exponential"), UsageError);
}

}  // namespace
}  // namespace loft
