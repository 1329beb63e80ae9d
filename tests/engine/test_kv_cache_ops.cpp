// The KV-cache ops on the CPU: cached_attention against ops::attention (the training forward's
// reference) on the same keys, bit for bit, with grouped heads and queries of several slots and
// positions in one call; kv_cache_write's placement and skipping; the errors both raise.
#include "engine/ops/kv_cache_ops.h"
#include "engine/ops/ops.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

struct Seq {
  int32_t slot;
  int64_t len;
};

// Every sequence's tokens written into a cache, then each token's query attends there; the result
// must equal ops::attention over the sequences packed as documents of one row.
TEST(KvCacheOps, CachedAttentionEqualsFullAttentionPerQuery) {
  std::mt19937 rng(5);
  const int64_t hq = 6, hkv = 2, d = 8, slots = 4, max_len = 40;
  const std::vector<Seq> seqs = {{2, 1}, {0, 7}, {3, 33}};
  int64_t T = 0;
  for (const Seq& s : seqs) T += s.len;
  const Tensor q = test::random_tensor({T, hq, d}, rng), k = test::random_tensor({T, hkv, d}, rng),
               v = test::random_tensor({T, hkv, d}, rng);
  std::vector<int32_t> slot_of, pos_of, doc;
  for (const Seq& s : seqs) {
    const int32_t first = int32_t(slot_of.size());
    for (int64_t j = 0; j < s.len; ++j)
      slot_of.push_back(s.slot), pos_of.push_back(int32_t(j)), doc.push_back(first);
  }
  const Tensor slots_t = Tensor::from_vector(slot_of, {T}), pos_t = Tensor::from_vector(pos_of, {T});
  Tensor kc = Tensor::zeros({slots, max_len, hkv, d}, DType::F32),
         vc = Tensor::zeros({slots, max_len, hkv, d}, DType::F32);
  ops::kv_cache_write(k, v, slots_t, pos_t, kc, vc);

  Tensor full = Tensor::empty({T, hq, d}, DType::F32), lse = Tensor::empty({T, hq}, DType::F32);
  ops::attention(q, k, v, Tensor::from_vector(doc, {T}), T, 0.3f, full, lse);
  Tensor cached = Tensor::empty({T, hq, d}, DType::F32);
  ops::cached_attention(q, kc, vc, slots_t, pos_t, 0.3f, cached);
  EXPECT_EQ(cached.to_float_vector(), full.to_float_vector());

  // The queries one at a time, in reverse order, give the same rows.
  for (int64_t t = T; t-- > 0;) {
    Tensor one = Tensor::empty({1, hq, d}, DType::F32);
    ops::cached_attention(q.slice(t, 1), kc, vc, slots_t.slice(t, 1), pos_t.slice(t, 1), 0.3f, one);
    ASSERT_EQ(one.to_float_vector(), full.slice(t, 1).to_float_vector()) << "token " << t;
  }
}

TEST(KvCacheOps, WritePlacesRowsAndSkipsNegativeSlots) {
  std::mt19937 rng(1);
  const Tensor k = test::random_tensor({3, 2, 4}, rng), v = test::random_tensor({3, 2, 4}, rng);
  Tensor kc = Tensor::zeros({2, 5, 2, 4}, DType::F32), vc = Tensor::zeros({2, 5, 2, 4}, DType::F32);
  ops::kv_cache_write(k, v, Tensor::from_vector(std::vector<int32_t>{1, -1, 0}, {3}),
                      Tensor::from_vector(std::vector<int32_t>{4, 0, 2}, {3}), kc, vc);
  const auto at = [](const Tensor& c, int64_t s, int64_t p) {
    return c.view({10, 2, 4}).slice(s * 5 + p, 1).to_float_vector();
  };
  EXPECT_EQ(at(kc, 1, 4), k.slice(0, 1).to_float_vector());
  EXPECT_EQ(at(vc, 0, 2), v.slice(2, 1).to_float_vector());
  double sum = 0;
  for (float x : kc.to_float_vector()) sum += std::abs(x);
  double want = 0;
  for (int64_t t : {0, 2})
    for (float x : k.slice(t, 1).to_float_vector()) want += std::abs(x);
  EXPECT_DOUBLE_EQ(sum, want);  // the skipped token wrote nothing
}

TEST(KvCacheOps, OutOfRangePlacesAndBadShapesAreErrors) {
  Tensor kc = Tensor::zeros({2, 5, 2, 4}, DType::F32), vc = Tensor::zeros({2, 5, 2, 4}, DType::F32);
  const Tensor k = Tensor::zeros({1, 2, 4}, DType::F32), q = Tensor::zeros({1, 4, 4}, DType::F32);
  const Tensor slot = Tensor::from_vector(std::vector<int32_t>{1}, {1});
  const Tensor past_end = Tensor::from_vector(std::vector<int32_t>{5}, {1});
  try {
    ops::kv_cache_write(k, k, slot, past_end, kc, vc);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "token 0 goes to slot 1 position 5"));
  }
  Tensor out = Tensor::empty({1, 4, 4}, DType::F32);
  EXPECT_THROW(ops::cached_attention(q, kc, vc, Tensor::from_vector(std::vector<int32_t>{2}, {1}),
                                     Tensor::from_vector(std::vector<int32_t>{0}, {1}), 1.0f, out),
               Error);
  const Tensor q3 = Tensor::zeros({1, 3, 4}, DType::F32);  // 3 heads over 2 kv heads
  Tensor out3 = Tensor::empty({1, 3, 4}, DType::F32);
  EXPECT_THROW(ops::cached_attention(q3, kc, vc, slot, Tensor::from_vector(std::vector<int32_t>{0}, {1}),
                                     1.0f, out3),
               Error);
}

}  // namespace
}  // namespace loft

namespace loft {
namespace {

TEST(KvCacheOps, ArgmaxRowsTakesTheLowestIdOfTheMaximumAndNeverNaN) {
  const float nan = std::nanf("");
  const std::vector<float> v = {1, 3, 3, 2,         // tie: the lower id
                                nan, 1, nan, -1,    // NaN never wins
                                nan, nan, nan, nan, // all NaN: id 0
                                -INFINITY, -INFINITY, -INFINITY, -5};
  const Tensor x = Tensor::from_vector(v, {4, 4});
  Tensor out = Tensor::empty({4}, DType::I32);
  ops::argmax_rows(x, out);
  EXPECT_EQ(out.to_int_vector(), (std::vector<int64_t>{1, 1, 0, 3}));
  Tensor wrong = Tensor::empty({3}, DType::I32);
  EXPECT_THROW(ops::argmax_rows(x, wrong), Error);
}

TEST(KvCacheOps, QueryTilesSplitRunsAt64Rows) {
  // Runs: slot 3 from position 10 (1 token), slot 0 from 0 (130 tokens), slot 5 from 70 (64).
  const std::vector<int32_t> t = ops::make_query_tiles({3, 0, 5}, {10, 0, 70}, {1, 130, 64});
  const std::vector<int32_t> want = {0,   1,  3, 10,   // first token, rows, slot, pos0
                                     1,   64, 0, 0,   65, 64, 0, 64, 129, 2, 0, 128,
                                     131, 64, 5, 70};
  EXPECT_EQ(t, want);
  EXPECT_THROW(ops::make_query_tiles({1}, {0, 1}, {1}), Error);
}

}  // namespace
}  // namespace loft
