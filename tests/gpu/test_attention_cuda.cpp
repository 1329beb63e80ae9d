// The CUDA attention free functions against the CPU reference (ops::cpu) on random inputs:
// forward out + lse and backward dq/dk/dv, F32 (full fp32, no TF32: 1e-4) and BF16 (1e-2),
// grouped-query heads, packed documents, the chunked paths of a small scratch budget (GEMM path),
// and the flash kernels (BF16, head dim 64/128) over partial tiles, GQA and several documents.
#include <cmath>
#include <optional>
#include <tuple>

#include "engine/ops/ops.h"
#include "engine/ops/cuda/attention_cuda.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

struct Case {
  int64_t rows, seq, hq, hkv, d;
  int64_t max_doc_len;  // 0: one document per row
  float sharpen = 1;    // multiplies the usual 1/√d scale: peaked softmax, large running-max jumps
};

std::string case_str(const Case& c, DType dt) {
  return cat(dtype_name(dt), " rows=", c.rows, " seq=", c.seq, " hq=", c.hq, " hkv=", c.hkv,
             " d=", c.d, " max_doc_len=", c.max_doc_len, " sharpen=", c.sharpen);
}

// A CPU F32 tensor whose values are representable in `dt`, so both backends see the same inputs.
Tensor random_in(const Shape& shape, DType dt, std::mt19937& rng) {
  Tensor t = test::random_tensor(shape, rng);
  if (dt == DType::F32) return t;
  std::vector<float> v = t.to_float_vector();
  for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return Tensor::from_vector(v, shape);
}

// A CPU F32 tensor on cuda:0 as `dt`.
Tensor on_gpu(const Tensor& t, DType dt) {
  if (dt == DType::F32) return t.to(Device::cuda(0));
  std::vector<uint16_t> bits;
  for (float x : t.to_float_vector()) bits.push_back(f32_to_bf16(x));
  return Tensor::from_host(bits.data(), t.shape(), DType::BF16, Device::cuda(0));
}

// path_is_flash: which CUDA path the case must take (checked, so a test cannot pass on the other).
void check_against_cpu(const Case& c, DType dt, double tol, std::mt19937& rng,
                       std::optional<bool> path_is_flash = std::nullopt) {
  SCOPED_TRACE(case_str(c, dt));
  const int64_t tokens = c.rows * c.seq;
  const Tensor q = random_in({tokens, c.hq, c.d}, dt, rng);
  const Tensor k = random_in({tokens, c.hkv, c.d}, dt, rng);
  const Tensor v = random_in({tokens, c.hkv, c.d}, dt, rng);
  const Tensor dout = random_in({tokens, c.hq, c.d}, dt, rng);
  const Tensor ds = c.max_doc_len == 0 ? Tensor::zeros({tokens}, DType::I32)
                                       : test::random_doc_start(c.rows, c.seq, c.max_doc_len, rng);
  const float scale = float(c.sharpen / std::sqrt(double(c.d)));

  Tensor out = Tensor::empty(q.shape(), DType::F32),
         lse = Tensor::empty({tokens, c.hq}, DType::F32);
  ops::cpu::attention(q, k, v, ds, c.seq, scale, out, lse);
  Tensor dq = Tensor::empty(q.shape(), DType::F32), dk = Tensor::empty(k.shape(), DType::F32),
         dv = Tensor::empty(v.shape(), DType::F32);
  ops::cpu::attention_backward(dout, q, k, v, out, lse, ds, c.seq, scale, dq, dk, dv);

  const Device gpu = Device::cuda(0);
  const Tensor gq = on_gpu(q, dt), gk = on_gpu(k, dt), gv = on_gpu(v, dt), gdout = on_gpu(dout, dt);
  const Tensor gds = ds.to(gpu);
  if (path_is_flash) {
    ASSERT_EQ(ops::cuda_attention::uses_flash(gq, gk, c.seq), *path_is_flash) << "path";
  }
  Tensor gout = Tensor::empty(q.shape(), dt, gpu),
         glse = Tensor::empty(lse.shape(), DType::F32, gpu);
  ops::cuda::attention(gq, gk, gv, gds, c.seq, scale, gout, glse);
  Tensor gdq = Tensor::empty(q.shape(), dt, gpu), gdk = Tensor::empty(k.shape(), dt, gpu),
         gdv = Tensor::empty(v.shape(), dt, gpu);
  ops::cuda::attention_backward(gdout, gq, gk, gv, gout, glse, gds, c.seq, scale, gdq, gdk, gdv);

  EXPECT_LT(test::rel_error(gout, out), tol) << "out";
  EXPECT_LT(test::rel_error(glse, lse), tol) << "lse";
  EXPECT_LT(test::rel_error(gdq, dq), tol) << "dq";
  EXPECT_LT(test::rel_error(gdk, dk), tol) << "dk";
  EXPECT_LT(test::rel_error(gdv, dv), tol) << "dv";
}

// seq 1 / 7 / 33 / 172 / 512, head_dim 8 / 24 / 64 / 128, query heads per kv head 1 / 2 / 4 / 6,
// with and without packed documents.
const Case kCases[] = {
    {3, 1, 8, 4, 64, 0},    {2, 7, 4, 4, 8, 3},       {1, 33, 6, 1, 24, 9}, {2, 172, 8, 4, 64, 40},
    {1, 172, 8, 2, 128, 0}, {2, 512, 8, 2, 128, 100}, {1, 512, 4, 4, 8, 0},
};

TEST(AttentionCuda, MatchesCpuF32) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(101);
  for (const Case& c : kCases) check_against_cpu(c, DType::F32, 1e-4, rng);
}

TEST(AttentionCuda, MatchesCpuBf16) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(202);
  for (const Case& c : kCases) check_against_cpu(c, DType::BF16, 1e-2, rng);
}

// Restores the default scratch budget when a test ends, even on failure.
struct ScratchBudget {
  size_t old;
  explicit ScratchBudget(size_t bytes) : old(ops::cuda_attention::set_scratch_budget(bytes)) {}
  ~ScratchBudget() { ops::cuda_attention::set_scratch_budget(old); }
};

TEST(AttentionCuda, ChunkedScratchMatchesCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(303);
  // 64 KiB: several (row, head) chunks at seq 33, query-row blocks at seq 172.
  // 1 byte: one entry and one query row per step.
  for (size_t budget : {size_t(64) << 10, size_t(1)}) {
    SCOPED_TRACE(cat("scratch budget ", budget, " bytes"));
    ScratchBudget guard(budget);
    for (const Case& c : {Case{2, 33, 8, 2, 64, 9}, Case{2, 172, 4, 1, 64, 50}}) {
      check_against_cpu(c, DType::F32, 1e-4, rng);
      check_against_cpu(c, DType::BF16, 1e-2, rng);
    }
  }
}

// Flash kernels (BF16, head dim 64 and 128): seq 1, 7, 130 and 512 (one partial tile, several
// tiles with a partial last one), 1 and 4 query heads per kv head, one document per row or
// several, batch 2; sharpened scores at seq 130 and 512 make the online softmax rescale a lot.
void check_flash_tiles(std::mt19937& rng) {
  for (int64_t d : {64, 128})
    for (int64_t seq : {1, 7, 130, 512})
      for (int64_t group : {1, 4})
        for (bool docs : {false, true}) {
          const Case c{2, seq, 2 * group, 2, d, docs ? seq / 3 + 1 : 0};
          check_against_cpu(c, DType::BF16, 1e-2, rng, true);
          if (seq >= 130 && group == 4) {
            Case sharp = c;
            sharp.sharpen = 6;
            check_against_cpu(sharp, DType::BF16, 1e-2, rng, true);
          }
        }
}

// Longer rows for the flash kernels' tiling: many key tiles per query tile and query steps per key
// tile (so the cp.async buffers cycle), seq a multiple of 64 but not of 128 (192) or of neither
// (700, 1000), 3 query heads per kv head, and many short documents, so most backward blocks stop
// early (queries past the last document touching their keys) and mask every step.
void check_flash_long_rows(std::mt19937& rng) {
  for (const Case& c : {Case{2, 700, 6, 2, 128, 50}, Case{1, 700, 3, 3, 64, 50},
                        Case{2, 192, 4, 1, 128, 0}, Case{1, 1000, 2, 1, 64, 0},
                        Case{1, 1000, 3, 1, 128, 0, 6}})
    check_against_cpu(c, DType::BF16, 1e-2, rng, true);
}

TEST(AttentionCuda, FlashMatchesCpuBf16) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(404);
  check_flash_tiles(rng);
}

TEST(AttentionCuda, FlashMatchesCpuBf16LongRowsShortDocuments) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(505);
  check_flash_long_rows(rng);
}

// Restores the device's own shared-memory limit when a test ends, even on failure.
struct FlashSharedLimit {
  size_t old;
  explicit FlashSharedLimit(size_t bytes) : old(ops::cuda_attention::set_flash_shared_limit(bytes)) {}
  ~FlashSharedLimit() { ops::cuda_attention::set_flash_shared_limit(old); }
};

// The backward kernel a consumer card runs (sm_86/89/120 grant a block 99 KiB, too little for the
// 128-key layout): forced on any GPU by that limit, through the same cases.
TEST(AttentionCuda, FlashBackwardOfConsumerCardsMatchesCpuBf16) {
  LOFT_REQUIRE_GPU();
  FlashSharedLimit guard(size_t(99) << 10);
  std::mt19937 rng(606);
  check_flash_tiles(rng);
  check_flash_long_rows(rng);
}

// The other dtypes and head dims keep the GEMM path, which the tests above cover.
TEST(AttentionCuda, FlashOnlyForBf16HeadDim64And128) {
  LOFT_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  for (auto [dt, d, flash] : {std::tuple{DType::BF16, 64, true}, std::tuple{DType::BF16, 128, true},
                              std::tuple{DType::F32, 64, false}, std::tuple{DType::F32, 128, false},
                              std::tuple{DType::BF16, 8, false}, std::tuple{DType::BF16, 32, false}}) {
    const Tensor q = Tensor::empty({8, 4, d}, dt, gpu), k = Tensor::empty({8, 2, d}, dt, gpu);
    EXPECT_EQ(ops::cuda_attention::uses_flash(q, k, 4), flash) << dtype_name(dt) << " d=" << d;
  }
}

}  // namespace
}  // namespace loft
