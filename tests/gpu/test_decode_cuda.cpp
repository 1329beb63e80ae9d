// KV-cache decoding on CUDA against the CPU reference: the two ops on random inputs (F32 and
// BF16, head dims 8/64/128, grouped heads, many slots and positions), the decode schedule of
// tests/common/decode_check.h for stories260K, wide-random and the GQA llama3 model (BF16 against
// the CPU's f32 and against the GPU's own full forward; F32 on the GPU against the CPU at 1e-4),
// llama2.c's greedy tokens in F32 and in BF16 (prefix), and the cache-size error.
#include <random>

#include "engine/ops/kv_cache_ops.h"
#include "models/llama/decode.h"
#include "models/llama/generate.h"
#include "tests/common/decode_check.h"
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft {
namespace {

using namespace llama;

struct OpCase {
  int64_t hq, hkv, d, slots, max_len;
};

TEST(DecodeCuda, CachedAttentionAndWriteMatchTheCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(9);
  for (DType dt : {DType::F32, DType::BF16}) {
    // BF16 at head dims 64/128: the decode kernel, keys split over blocks for few queries and
    // not for many (320 queries × 4 KV heads; 160 × 32 heads), splits of 512 keys over a long
    // cache (1,500 positions), query groups of 1, 2, 3 (served by the 4-head instance), 4 and 8.
    for (const OpCase& c : {OpCase{8, 4, 8, 3, 40}, OpCase{8, 2, 64, 5, 300}, OpCase{4, 4, 128, 2, 70},
                            OpCase{16, 4, 128, 80, 200}, OpCase{32, 4, 128, 3, 1500},
                            OpCase{12, 4, 64, 4, 700}, OpCase{32, 32, 128, 40, 130},
                            OpCase{16, 8, 128, 2, 600}}) {
      SCOPED_TRACE(cat(test::name(dt), " hq=", c.hq, " hkv=", c.hkv, " d=", c.d));
      // Fill every slot to a random length, then query a few positions of each.
      const int64_t T = c.slots * c.max_len;
      std::vector<int32_t> slot_all, pos_all;
      for (int64_t s = 0; s < c.slots; ++s)
        for (int64_t p = 0; p < c.max_len; ++p) slot_all.push_back(int32_t(s)), pos_all.push_back(int32_t(p));
      const Tensor k = test::cpu_f32(test::to_gpu(test::random_tensor({T, c.hkv, c.d}, rng), dt));
      const Tensor v = test::cpu_f32(test::to_gpu(test::random_tensor({T, c.hkv, c.d}, rng), dt));
      const Tensor sl = Tensor::from_vector(slot_all, {T}), ps = Tensor::from_vector(pos_all, {T});
      Tensor kc = Tensor::zeros({c.slots, c.max_len, c.hkv, c.d}, DType::F32), vc = kc.clone();
      ops::kv_cache_write(k, v, sl, ps, kc, vc);
      Tensor gkc = Tensor::zeros(kc.shape(), dt, test::kGpu), gvc = Tensor::zeros(kc.shape(), dt, test::kGpu);
      ops::kv_cache_write(test::to_gpu(k, dt), test::to_gpu(v, dt), sl.to(test::kGpu), ps.to(test::kGpu), gkc, gvc);
      EXPECT_EQ(gkc.to_float_vector(), kc.to_float_vector());
      EXPECT_EQ(gvc.to_float_vector(), vc.to_float_vector());

      std::vector<int32_t> qs, qp;
      for (int64_t s = 0; s < c.slots; ++s)
        for (int64_t p : {int64_t(0), c.max_len / 3, c.max_len - 1, int64_t(rng() % uint32_t(c.max_len))})
          qs.push_back(int32_t(s)), qp.push_back(int32_t(p));
      const int64_t Q = int64_t(qs.size());
      const Tensor q = test::cpu_f32(test::to_gpu(test::random_tensor({Q, c.hq, c.d}, rng, -2, 2), dt));
      const Tensor qsl = Tensor::from_vector(qs, {Q}), qps = Tensor::from_vector(qp, {Q});
      Tensor want = Tensor::empty({Q, c.hq, c.d}, DType::F32);
      ops::cached_attention(q, kc, vc, qsl, qps, 0.5f, want);
      Tensor got = Tensor::empty({Q, c.hq, c.d}, dt, test::kGpu);
      ops::cached_attention(test::to_gpu(q, dt), gkc, gvc, qsl.to(test::kGpu), qps.to(test::kGpu), 0.5f, got);
      EXPECT_LT(test::rel_error(got, want), test::tol(dt));
    }
  }
}

// Greedy choice on the device equals the host's argmax: ties (lowest id), -inf, NaN (never chosen
// unless the row is all NaN), vocabularies of 1, odd sizes and Llama 3's 128,256.
TEST(DecodeCuda, ArgmaxRowsMatchesTheCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(5);
  for (int64_t vocab : {int64_t(1), int64_t(7), int64_t(300), int64_t(32000), int64_t(128256)}) {
    SCOPED_TRACE(cat("vocab ", vocab));
    const int64_t rows = 9;
    Tensor x = test::random_tensor({rows, vocab}, rng, -4, 4);
    float* p = x.ptr<float>();
    std::uniform_int_distribution<int64_t> at(0, vocab - 1);
    for (int64_t i = 0; i < vocab; ++i) p[1 * vocab + i] = 2.0f;                   // all tied
    for (int64_t i = 0; i < vocab; ++i) p[2 * vocab + i] = std::nanf("");           // all NaN
    for (int64_t i = 0; i < vocab; ++i) p[3 * vocab + i] = -INFINITY;               // all -inf
    for (int k = 0; k < 5; ++k) p[4 * vocab + at(rng)] = std::nanf("");              // NaN among values
    p[4 * vocab] = std::nanf("");
    const int64_t a = at(rng), b = at(rng);                                          // two equal maxima
    p[5 * vocab + a] = p[5 * vocab + b] = 9.0f;
    p[6 * vocab + vocab - 1] = 9.0f;                                                 // the last id
    p[7 * vocab + at(rng)] = INFINITY;
    Tensor want = Tensor::empty({rows}, DType::I32), got = Tensor::empty({rows}, DType::I32, test::kGpu);
    ops::argmax_rows(x, want);
    ops::argmax_rows(x.to(test::kGpu), got);
    EXPECT_EQ(got.to_int_vector(), want.to_int_vector());
    EXPECT_EQ(want.ptr<int32_t>()[1], 0);
    EXPECT_EQ(want.ptr<int32_t>()[2], 0);
    EXPECT_EQ(want.ptr<int32_t>()[5], int32_t(std::min(a, b)));
    EXPECT_EQ(want.ptr<int32_t>()[6], int32_t(vocab - 1));
  }
}

// The run-tiled flash path (scoring continuations after a cached prefix): runs of 1..150 queries
// at any start (tiles split at 64 rows, starts off the 64-key grid), grouped heads, against the CPU.
TEST(DecodeCuda, CachedAttentionByRunsMatchesTheCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(17);
  for (const OpCase& c : {OpCase{8, 2, 64, 6, 400}, OpCase{4, 4, 128, 5, 333}, OpCase{32, 8, 128, 3, 260}}) {
    SCOPED_TRACE(cat("hq=", c.hq, " hkv=", c.hkv, " d=", c.d));
    const Tensor kc = test::cpu_f32(test::to_gpu(test::random_tensor({c.slots, c.max_len, c.hkv, c.d}, rng), DType::BF16));
    const Tensor vc = test::cpu_f32(test::to_gpu(test::random_tensor({c.slots, c.max_len, c.hkv, c.d}, rng), DType::BF16));
    std::vector<int32_t> run_slot, run_start, run_count, qs, qp;
    for (int64_t s = 0; s < c.slots; ++s) {
      const int32_t count = s == 0 ? 1 : int32_t(1 + rng() % 150);
      const int32_t start = int32_t(rng() % uint32_t(c.max_len - count + 1));
      run_slot.push_back(int32_t(s)), run_start.push_back(start), run_count.push_back(count);
      for (int32_t i = 0; i < count; ++i) qs.push_back(int32_t(s)), qp.push_back(start + i);
    }
    const int64_t Q = int64_t(qs.size());
    const Tensor q = test::cpu_f32(test::to_gpu(test::random_tensor({Q, c.hq, c.d}, rng, -2, 2), DType::BF16));
    const Tensor qsl = Tensor::from_vector(qs, {Q}), qps = Tensor::from_vector(qp, {Q});
    Tensor want = Tensor::empty({Q, c.hq, c.d}, DType::F32);
    ops::cached_attention(q, kc, vc, qsl, qps, 0.3f, want);
    const std::vector<int32_t> t = ops::make_query_tiles(run_slot, run_start, run_count);
    const Tensor tiles = Tensor::from_vector(t, {int64_t(t.size() / 4), 4}, test::kGpu);
    Tensor got = Tensor::empty({Q, c.hq, c.d}, DType::BF16, test::kGpu);
    ops::cached_attention(test::to_gpu(q, DType::BF16), test::to_gpu(kc, DType::BF16), test::to_gpu(vc, DType::BF16),
                          qsl.to(test::kGpu), qps.to(test::kGpu), 0.3f, got, &tiles);
    EXPECT_LT(test::rel_error(got, want), test::tol(DType::BF16));
  }
}

void check_model_bf16(const std::string& name) {
  LOFT_REQUIRE_GPU();
  auto cpu = test::decode_test_model(name, Device::cpu(), DType::F32);
  auto gpu = test::decode_test_model(name, test::kGpu, DType::BF16);
  const auto want = test::run_decode_schedule(*cpu);
  const auto got = test::run_decode_schedule(*gpu);
  const double vs_cpu = test::worst_between(got, want);
  const double vs_full = test::worst_vs_full_forward(*gpu, got);
  ::testing::Test::RecordProperty("worst_vs_cpu", cat(vs_cpu));
  ::testing::Test::RecordProperty("worst_vs_gpu_full_forward", cat(vs_full));
  EXPECT_LT(vs_cpu, 3e-2) << name;   // bf16 weights and activations against f32
  EXPECT_LT(vs_full, 2e-2) << name;  // the same bf16 model, cache against full forward
}

TEST(DecodeCuda, Stories260kBf16MatchesCpu) { check_model_bf16("stories260K-hf"); }
TEST(DecodeCuda, WideRandomBf16MatchesCpu) { check_model_bf16("wide-random"); }
TEST(DecodeCuda, GqaLlama3Bf16MatchesCpu) { check_model_bf16("gqa-llama3"); }

TEST(DecodeCuda, F32OnTheGpuMatchesCpu) {
  LOFT_REQUIRE_GPU();
  for (const char* name : {"stories260K-hf", "wide-random", "gqa-llama3"}) {
    auto cpu = test::decode_test_model(name, Device::cpu(), DType::F32);
    auto gpu = test::decode_test_model(name, test::kGpu, DType::F32);
    EXPECT_LT(test::worst_between(test::run_decode_schedule(*gpu), test::run_decode_schedule(*cpu)), 1e-4)
        << name;
  }
}

// llama2.c's greedy tokens from BOS (tests/models/test_generate.cpp has the file's details).
std::vector<int32_t> llama2c_greedy() {
  return {403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401,
          396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385};
}

TEST(DecodeCuda, GreedyFromBosFollowsLlama2c) {
  LOFT_REQUIRE_GPU();
  const auto want = llama2c_greedy();
  for (DType dt : {DType::F32, DType::BF16}) {
    auto gpu = test::decode_test_model("stories260K-hf", test::kGpu, dt);
    KvCache cache = KvCache::for_model(*gpu, 2, 64);
    EXPECT_EQ(cache.k(0).dtype(), dt);
    GenerateOptions opt;
    opt.max_new_tokens = int64_t(want.size());
    const auto got = generate(*gpu, cache, {{1}, {1}}, opt);
    // F32 must follow all of it; BF16 at least the first 16 tokens (a near-tie may flip later).
    const size_t n = dt == DType::F32 ? want.size() : 16;
    for (const auto& g : got)
      EXPECT_EQ(std::vector<int32_t>(g.tokens.begin(), g.tokens.begin() + int64_t(n)),
                std::vector<int32_t>(want.begin(), want.begin() + int64_t(n)))
          << test::name(dt);
  }
}

TEST(DecodeCuda, RequestOverTheCacheIsAClearError) {
  LOFT_REQUIRE_GPU();
  auto gpu = test::decode_test_model("stories260K-hf", test::kGpu, DType::BF16);
  KvCache cache = KvCache::for_model(*gpu, 1, 8);
  EXPECT_THROW(decode_step(*gpu, cache, {Feed::last(0, std::vector<int32_t>(9, 5))}), Error);
  EXPECT_EQ(cache.length(0), 0);
}

}  // namespace
}  // namespace loft
