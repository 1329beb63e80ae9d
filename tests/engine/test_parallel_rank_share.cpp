// The split of one optimizer step's micro-batches over data-parallel ranks.
#include <gtest/gtest.h>

#include <vector>

#include "engine/parallel/rank_share.h"
#include "tests/common/eval_util.h"
#include "tests/common/test_util.h"

namespace loft::parallel {
namespace {

TEST(DistRankShare, EveryIndexExactlyOnceAndEvenShares) {
  for (int world = 1; world <= 8; ++world) {
    for (size_t per_rank : {1, 2, 3, 7}) {
      const size_t total = per_rank * size_t(world);
      std::vector<int> hits(total, 0);
      for (int rank = 0; rank < world; ++rank) {
        const auto mine = micro_batches_of_rank(total, world, rank);
        ASSERT_EQ(mine.size(), per_rank) << "world " << world << " rank " << rank;
        for (size_t j = 0; j < mine.size(); ++j) {
          EXPECT_EQ(mine[j], size_t(rank) + j * size_t(world));  // strided, in step order
          ASSERT_LT(mine[j], total);
          ++hits[mine[j]];
        }
      }
      for (size_t i = 0; i < total; ++i)
        EXPECT_EQ(hits[i], 1) << "index " << i << " world " << world;
    }
  }
}

TEST(DistRankShare, OneRankRunsEverything) {
  EXPECT_EQ(micro_batches_of_rank(4, 1, 0), (std::vector<size_t>{0, 1, 2, 3}));
}

TEST(DistRankShare, UnevenSplitNamesBothNumbers) {
  const std::string msg = test::error_of([] { micro_batches_of_rank(6, 4, 0); });
  EXPECT_TRUE(test::contains(
      msg, "6 micro-batches per optimizer step cannot be split evenly over 4 ranks"));
  EXPECT_TRUE(
      test::contains(test::error_of([] { micro_batches_of_rank(0, 2, 0); }),
                     "0 micro-batches per optimizer step cannot be split evenly over 2 ranks"));
}

TEST(DistRankShare, BadWorldOrRank) {
  EXPECT_TRUE(test::contains(test::error_of([] { micro_batches_of_rank(4, 0, 0); }),
                             "world size 0 must be at least 1"));
  EXPECT_TRUE(test::contains(test::error_of([] { micro_batches_of_rank(4, 2, 2); }),
                             "rank 2 is out of range for a world of 2 ranks"));
  EXPECT_TRUE(test::contains(test::error_of([] { micro_batches_of_rank(4, 2, -1); }),
                             "rank -1 is out of range"));
}

TEST(DistRankShare, TheLastShortStepIsSharedUnevenly) {
  EXPECT_EQ(strided_share(6, 4, 0), (std::vector<size_t>{0, 4}));
  EXPECT_EQ(strided_share(6, 4, 1), (std::vector<size_t>{1, 5}));
  EXPECT_EQ(strided_share(6, 4, 3), (std::vector<size_t>{3}));
  EXPECT_EQ(strided_share(2, 4, 3), std::vector<size_t>{});  // a rank with nothing to do
  EXPECT_EQ(strided_share(8, 4, 2), micro_batches_of_rank(8, 4, 2));
  EXPECT_TRUE(test::contains(test::error_of([] { strided_share(4, 0, 0); }), "at least 1"));
  EXPECT_TRUE(test::contains(test::error_of([] { strided_share(4, 2, 2); }), "rank 2 is out of range"));
}

}  // namespace
}  // namespace loft::parallel
