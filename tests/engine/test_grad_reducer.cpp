// GradReducer's bucketing (engine/parallel/grad_reducer.h) on the CPU: the pure plan (which params go
// in which bucket, an oversize param alone, empty params, the cap exactly met) and the reducer
// driving a recording Communicator: one all_reduce_sum per bucket, the grads in the params'
// order, the wait after, and the portable factories' error without NCCL.
#include <gtest/gtest.h>

#include <numeric>

#include "engine/parallel/grad_reducer.h"
#include "tests/common/recording_comm.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

std::vector<BucketRange> plan(std::vector<size_t> bytes, size_t cap) {
  return plan_buckets(bytes, cap);
}

TEST(GradReducerPlan, PacksConsecutiveParamsUpToTheCap) {
  EXPECT_EQ(plan({}, 10), std::vector<BucketRange>{});
  EXPECT_EQ(plan({4, 4, 4}, 10), (std::vector<BucketRange>{{0, 2, 8}, {2, 3, 4}}));
  // The cap exactly met stays one bucket; one byte more starts the next.
  EXPECT_EQ(plan({5, 5, 1}, 10), (std::vector<BucketRange>{{0, 2, 10}, {2, 3, 1}}));
  EXPECT_EQ(plan({10, 10}, 10), (std::vector<BucketRange>{{0, 1, 10}, {1, 2, 10}}));
}

TEST(GradReducerPlan, AnOversizeParamGetsABucketOfItsOwn) {
  EXPECT_EQ(plan({3, 25, 2, 2}, 10),
            (std::vector<BucketRange>{{0, 1, 3}, {1, 2, 25}, {2, 4, 4}}));
  EXPECT_EQ(plan({25}, 10), (std::vector<BucketRange>{{0, 1, 25}}));
  EXPECT_EQ(plan({25, 30}, 10), (std::vector<BucketRange>{{0, 1, 25}, {1, 2, 30}}));
}

TEST(GradReducerPlan, EmptyParamsRideAlong) {
  EXPECT_EQ(plan({0, 0, 7, 0, 7}, 10), (std::vector<BucketRange>{{0, 4, 7}, {4, 5, 7}}));
  EXPECT_EQ(plan({0, 25}, 10), (std::vector<BucketRange>{{0, 2, 25}}));
}

TEST(GradReducerPlan, CoversEveryParamOnceWithinTheCap) {
  std::mt19937 rng(17);
  for (size_t cap : {size_t(1), size_t(64), size_t(1000)}) {
    std::vector<size_t> bytes(200);
    for (size_t& b : bytes) b = rng() % 1500;
    const auto buckets = plan_buckets(bytes, cap);
    size_t next = 0;
    for (const BucketRange& b : buckets) {
      EXPECT_EQ(b.first, next);
      EXPECT_LT(b.first, b.last);
      const size_t sum = std::accumulate(bytes.begin() + long(b.first),
                                         bytes.begin() + long(b.last), size_t(0));
      EXPECT_EQ(b.bytes, sum);
      // Over the cap only when one param alone (plus empty ones) is.
      if (b.bytes > cap) {
        EXPECT_EQ(std::count_if(bytes.begin() + long(b.first), bytes.begin() + long(b.last),
                                [](size_t x) { return x > 0; }),
                  1);
      }
      next = b.last;
    }
    EXPECT_EQ(next, bytes.size());
  }
  EXPECT_THROW(plan_buckets(std::vector<size_t>{1}, 0), Error);
}

using test::RecordingComm;

TEST(GradReducer, OneGroupPerBucketInParamOrderThenWait) {
  std::mt19937 rng(3);
  std::vector<Param> params;
  for (int64_t n : {5, 300, 1, 2000, 0, 17, 17})
    params.push_back({"p", Tensor::zeros({n}, DType::F32), test::random_tensor({n}, rng)});
  std::vector<Param*> ptrs;
  std::vector<std::vector<float>> before;
  for (Param& p : params) {
    ptrs.push_back(&p);
    before.push_back(p.grad.to_float_vector());
  }
  RecordingComm comm;
  GradReducer reducer(comm, 1300 * sizeof(float), std::chrono::milliseconds(1234));
  float scalars[2] = {1.5f, -2.0f};
  reducer.sum(ptrs, scalars);

  const std::vector<BucketRange> want{
      {0, 3, 306 * 4}, {3, 4, 2000 * 4}, {4, 7, 34 * 4}};
  EXPECT_EQ(reducer.buckets(), want);
  ASSERT_EQ(comm.groups.size(), want.size());
  size_t k = 0;
  for (size_t b = 0; b < want.size(); ++b) {
    const size_t extra = b + 1 == want.size() ? 1 : 0;  // the scalars ride in the last group
    const std::vector<Tensor*>& g = comm.groups[b].tensors;
    ASSERT_EQ(g.size(), want[b].last - want[b].first + extra);
    for (size_t j = 0; j + extra < g.size(); ++j) EXPECT_EQ(g[j], &params[k++].grad);
  }
  EXPECT_EQ(scalars[0], 3.0f);
  EXPECT_EQ(scalars[1], -4.0f);
  EXPECT_EQ(comm.waits, std::vector<std::chrono::milliseconds>{std::chrono::milliseconds(1234)});
  for (size_t i = 0; i < params.size(); ++i) {
    const std::vector<float> after = params[i].grad.to_float_vector();
    for (size_t j = 0; j < after.size(); ++j) ASSERT_EQ(after[j], 2 * before[i][j]);
  }
}

// begin() plans over the backward's order; ready() launches each complete bucket in plan order
// (a later bucket complete first waits for the earlier ones), never the last, which sum() launches
// with the scalars; every grad is summed once.
TEST(GradReducer, ReadyLaunchesCompleteBucketsInPlanOrderAndSumTheRest) {
  std::mt19937 rng(5);
  std::vector<Param> params;
  for (int64_t n : {4, 4, 4, 4, 4, 4})
    params.push_back({"p" + std::to_string(params.size()), Tensor::zeros({n}, DType::F32),
                      test::random_tensor({n}, rng)});
  std::vector<Param*> order;  // the backward's order: the last params first
  for (size_t i = params.size(); i-- > 0;) order.push_back(&params[i]);
  std::vector<std::vector<float>> before;
  for (const Param& p : params) before.push_back(p.grad.to_float_vector());
  RecordingComm comm;
  GradReducer reducer(comm, 8 * sizeof(float));  // two params a bucket: {5,4} {3,2} {1,0}
  reducer.begin(order);
  const auto ready = [&](int mark, std::vector<size_t> which) {
    comm.now = mark;
    std::vector<Param*> ps;
    for (size_t i : which) ps.push_back(&params[i]);
    reducer.ready(ps);
  };
  ready(1, {3, 2});  // bucket 1 complete, bucket 0 not: nothing yet
  EXPECT_TRUE(comm.groups.empty());
  ready(2, {5});
  EXPECT_TRUE(comm.groups.empty());
  ready(3, {4, 1});  // bucket 0, then bucket 1 behind it
  ASSERT_EQ(comm.groups.size(), 2u);
  ready(4, {0});  // the last bucket waits for sum()
  EXPECT_EQ(comm.groups.size(), 2u);
  EXPECT_THROW(ready(4, {0}), Error) << "reported twice";
  Param stranger{"x", Tensor::zeros({1}, DType::F32), Tensor::zeros({1}, DType::F32)};
  EXPECT_THROW(reducer.ready(std::vector<Param*>{&stranger}), Error);
  comm.now = 5;
  float scalars[1] = {0.25f};
  std::vector<Param*> forward;  // sum() takes the params in any order
  for (Param& p : params) forward.push_back(&p);
  reducer.sum(forward, scalars);
  EXPECT_EQ(scalars[0], 0.5f);
  const std::vector<std::vector<Tensor*>> want{{&params[5].grad, &params[4].grad},
                                               {&params[3].grad, &params[2].grad},
                                               {&params[1].grad, &params[0].grad}};
  const int marks[] = {3, 3, 5};
  ASSERT_EQ(comm.groups.size(), 3u);
  for (size_t b = 0; b < 3; ++b) {
    std::vector<Tensor*> got = comm.groups[b].tensors;
    if (b == 2) got.pop_back();  // the scalars
    EXPECT_EQ(got, want[b]) << "bucket " << b;
    EXPECT_EQ(comm.groups[b].now, marks[b]) << "bucket " << b;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const std::vector<float> after = params[i].grad.to_float_vector();
    for (size_t j = 0; j < after.size(); ++j) ASSERT_EQ(after[j], 2 * before[i][j]);
  }
  // The step is over: a report now is refused, and the next sum plans over its own params.
  EXPECT_THROW(ready(6, {0}), Error);
  reducer.begin(order);
  EXPECT_THROW(reducer.sum(std::span<Param* const>(forward).first(5), {}), Error);
}

// A cap of 0 (--grad-bucket-mib 0): the default buckets, all sent by sum(), none from ready().
TEST(GradReducer, ACapOfZeroSendsEveryBucketAfterTheBackward) {
  std::mt19937 rng(6);
  std::vector<Param> params;
  for (int64_t n : {int64_t(4) << 20, int64_t(4) << 20, int64_t(1) << 20})  // 16, 16 and 4 MiB
    params.push_back({"p" + std::to_string(params.size()), Tensor::zeros({n}, DType::F32),
                      test::random_tensor({n}, rng)});
  std::vector<Param*> order;
  for (Param& p : params) order.push_back(&p);
  RecordingComm comm;
  GradReducer reducer(comm, 0);
  reducer.begin(order);
  comm.now = 1;
  reducer.ready(order);
  EXPECT_TRUE(comm.groups.empty()) << "nothing leaves during the backward";
  comm.now = 2;
  reducer.sum(order, {});
  const std::vector<BucketRange> want{{0, 1, size_t(16) << 20}, {1, 3, size_t(20) << 20}};
  EXPECT_EQ(reducer.buckets(), want) << "25 MiB buckets";
  ASSERT_EQ(comm.groups.size(), 2u);
  for (const RecordingComm::Group& g : comm.groups) EXPECT_EQ(g.now, 2);
}

// Rank 1 of 3 whose peers' contributions to any all-reduce are fixed tensors: the sum is this
// rank's tensor plus theirs, as NCCL would leave it.
class PeerComm final : public Communicator {
 public:
  std::vector<std::vector<float>> peers;  // what ranks 0 and 2 contribute
  int rank() const override { return 1; }
  int world_size() const override { return 3; }
  Device device() const override { return Device::cpu(); }
  void all_reduce_sum(std::span<Tensor* const> tensors) override {
    ASSERT_EQ(tensors.size(), 1u);
    float* d = tensors[0]->ptr<float>();
    for (const auto& p : peers) {
      ASSERT_EQ(int64_t(p.size()), tensors[0]->numel());
      for (size_t i = 0; i < p.size(); ++i) d[i] += p[i];
    }
  }
  void wait(std::chrono::milliseconds) override {}
  void abort() override {}
};

std::vector<float> slots_of(int rank, uint64_t v) {
  std::vector<float> s(12, 0.0f);
  for (int k = 0; k < 4; ++k) s[size_t(4 * rank + k)] = float((v >> (16 * k)) & 0xffff);
  return s;
}

TEST(GradReducer, GatherReturnsEveryRanksValueExactly) {
  PeerComm comm;
  const uint64_t v0 = 0xffffffffffffffffull, v1 = 0x0123456789abcdefull, v2 = 0;
  comm.peers = {slots_of(0, v0), slots_of(2, v2)};
  GradReducer reducer(comm);
  EXPECT_EQ(reducer.gather(v1), (std::vector<uint64_t>{v0, v1, v2}));
}

TEST(NcclComm, FactoriesSayWhenThereIsNoNccl) {
  if (nccl_compiled()) GTEST_SKIP() << "this build links NCCL (tests/gpu cover it)";
  EXPECT_THROW(new_unique_id(), Error);
  EXPECT_THROW(make_communicators({0}), Error);
  const NcclUniqueId id{};
  EXPECT_THROW(make_communicator(0, id, 1, 0), Error);
}

}  // namespace
}  // namespace loft
