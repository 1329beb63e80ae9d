// The CUDA attention free functions against the CPU reference (ops::cpu) on random inputs:
// forward out + lse and backward dq/dk/dv, F32 (full fp32, no TF32: 1e-4) and BF16 (1e-2),
// grouped-query heads, packed documents, the chunked paths of a small scratch budget (GEMM path),
// and the flash kernels (BF16, head dim 64/128) over partial tiles, GQA and several documents.
#include <cmath>
#include <optional>
#include <tuple>

#include <cuda_runtime.h>

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

// Sets one of attention_cuda.h's test switches (each returns its previous value) and restores it
// when the test ends, even on failure.
template <typename T>
struct Switch {
  T (*set)(T);
  T old;
  Switch(T (*setter)(T), T value) : set(setter), old(setter(value)) {}
  ~Switch() { set(old); }
};

TEST(AttentionCuda, ChunkedScratchMatchesCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(303);
  // 64 KiB: several (row, head) chunks at seq 33, query-row blocks at seq 172.
  // 1 byte: one entry and one query row per step.
  for (size_t budget : {size_t(64) << 10, size_t(1)}) {
    SCOPED_TRACE(cat("scratch budget ", budget, " bytes"));
    Switch<size_t> guard(ops::cuda_attention::set_scratch_budget, budget);
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

// Both sets of flash cases, for a kernel a test switch forces.
void check_every_flash_case(uint32_t seed) {
  std::mt19937 rng(seed);
  check_flash_tiles(rng);
  check_flash_long_rows(rng);
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

// The backward kernel a consumer card runs (sm_86/89/120 grant a block 99 KiB, too little for the
// 128-key layout): forced on any GPU by that limit, through the same cases.
TEST(AttentionCuda, FlashBackwardOfConsumerCardsMatchesCpuBf16) {
  LOFT_REQUIRE_GPU();
  Switch<size_t> guard(ops::cuda_attention::set_flash_shared_limit, size_t(99) << 10);
  check_every_flash_case(606);
}

// The forward every GPU but Hopper runs (mma.sync), forced on any GPU, through the same cases (on
// an H100/H200 the tests above run the wgmma kernels at head dim 128).
TEST(AttentionCuda, FlashForwardOfOtherGpusMatchesCpuBf16) {
  LOFT_REQUIRE_GPU();
  Switch<bool> guard(ops::cuda_attention::set_hopper_forward, false);
  check_every_flash_case(707);
}

// The 128-key mma.sync backward (what an H100/H200 runs without the wgmma kernels, and an sm_80
// GPU), forced on a Hopper GPU, through the same cases; elsewhere these are the tests above again.
TEST(AttentionCuda, FlashBackwardOf128KeyLayoutMatchesCpuBf16) {
  LOFT_REQUIRE_GPU();
  Switch<bool> guard(ops::cuda_attention::set_hopper_backward, false);
  check_every_flash_case(909);
}

bool is_hopper(int device) {
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  return major == 9 && minor == 0;
}

using UsesKernel = bool (*)(const Tensor& q, const Tensor& k, int64_t seq);

// On an H100/H200 a build with sm_90a code takes the wgmma kernel (`uses`: the forward's or the
// backward's) for BF16 at head dim 128 and nothing else; elsewhere never. Its switch (`set`)
// forbids it and leaves the other kernel's (`uses_other`) alone. Returns whether it runs here.
bool check_hopper_path(UsesKernel uses, bool (*set)(bool), UsesKernel uses_other) {
  const Device gpu = Device::cuda(0);
  const bool expect = is_hopper(0) && ops::cuda_attention::hopper_kernels_built();
  for (auto [dt, d, hopper] : {std::tuple{DType::BF16, 128, expect}, std::tuple{DType::BF16, 64, false},
                               std::tuple{DType::F32, 128, false}}) {
    const Tensor q = Tensor::empty({8, 4, d}, dt, gpu), k = Tensor::empty({8, 2, d}, dt, gpu);
    EXPECT_EQ(uses(q, k, 4), hopper) << dtype_name(dt) << " d=" << d;
  }
  const Tensor q = Tensor::empty({8, 4, 128}, DType::BF16, gpu), k = Tensor::empty({8, 2, 128}, DType::BF16, gpu);
  Switch<bool> guard(set, false);
  EXPECT_FALSE(uses(q, k, 4)) << "forbidden";
  EXPECT_EQ(uses_other(q, k, 4), expect) << "the other kernel has its own switch";
  return expect;
}

TEST(AttentionCuda, HopperForwardOnlyOnSm90AtHeadDim128) {
  LOFT_REQUIRE_GPU();
  namespace ca = ops::cuda_attention;
  if (!check_hopper_path(ca::uses_hopper_forward, ca::set_hopper_forward, ca::uses_hopper_backward))
    GTEST_SKIP() << "not an sm_90 GPU with an sm_90a build: the wgmma kernels do not run here";
}

// The backward likewise, and not where a block may not take the 128-key layout's shared memory.
TEST(AttentionCuda, HopperBackwardOnlyOnSm90AtHeadDim128) {
  LOFT_REQUIRE_GPU();
  namespace ca = ops::cuda_attention;
  const bool runs = check_hopper_path(ca::uses_hopper_backward, ca::set_hopper_backward, ca::uses_hopper_forward);
  {
    Switch<size_t> guard(ca::set_flash_shared_limit, size_t(99) << 10);
    const Tensor q = Tensor::empty({8, 4, 128}, DType::BF16, Device::cuda(0));
    const Tensor k = Tensor::empty({8, 2, 128}, DType::BF16, Device::cuda(0));
    EXPECT_FALSE(ca::uses_hopper_backward(q, k, 4)) << "a consumer card's 99 KiB";
  }
  if (!runs) GTEST_SKIP() << "not an sm_90 GPU with an sm_90a build: the wgmma kernels do not run here";
}

// One case's inputs on the GPU (BF16) and what forward and backward give there.
struct GpuRun {
  Tensor out, lse, dq, dk, dv;
};
struct GpuInputs {
  Tensor q, k, v, dout, ds;
  float scale;

  GpuInputs(const Case& c, std::mt19937& rng) {
    const int64_t tokens = c.rows * c.seq;
    const Device gpu = Device::cuda(0);
    q = on_gpu(random_in({tokens, c.hq, c.d}, DType::BF16, rng), DType::BF16);
    k = on_gpu(random_in({tokens, c.hkv, c.d}, DType::BF16, rng), DType::BF16);
    v = on_gpu(random_in({tokens, c.hkv, c.d}, DType::BF16, rng), DType::BF16);
    dout = on_gpu(random_in({tokens, c.hq, c.d}, DType::BF16, rng), DType::BF16);
    ds = (c.max_doc_len == 0 ? Tensor::zeros({tokens}, DType::I32)
                             : test::random_doc_start(c.rows, c.seq, c.max_doc_len, rng))
             .to(gpu);
    scale = float(c.sharpen / std::sqrt(double(c.d)));
  }

  GpuRun run(int64_t seq) const {
    const Device gpu = Device::cuda(0);
    GpuRun r{Tensor::empty(q.shape(), DType::BF16, gpu), Tensor::empty({q.size(0), q.size(1)}, DType::F32, gpu),
             Tensor::empty(q.shape(), DType::BF16, gpu), Tensor::empty(k.shape(), DType::BF16, gpu),
             Tensor::empty(v.shape(), DType::BF16, gpu)};
    ops::cuda::attention(q, k, v, ds, seq, scale, r.out, r.lse);
    ops::cuda::attention_backward(dout, q, k, v, r.out, r.lse, ds, seq, scale, r.dq, r.dk, r.dv);
    return r;
  }
};

// Rows of 2048 and 4096 tokens (16 and 32 key tiles of 128 per query tile, 32 and 64 query steps
// per key tile: every cp.async buffer cycles many times; 4096 is the training shape the kernels
// are for): the wgmma kernels against the mma.sync ones, both BF16 on the GPU, with one document
// per row, many short documents (most tiles masked by document starts), sharpened scores and
// grouped heads split over blocks; and one row of 2048 against the CPU. The backward compares
// against the mma.sync forward's outputs so only the backward kernel differs.
TEST(AttentionCuda, HopperKernelsMatchOtherGpusLongRows) {
  LOFT_REQUIRE_GPU();
  if (!is_hopper(0) || !ops::cuda_attention::hopper_kernels_built())
    GTEST_SKIP() << "not an sm_90 GPU with an sm_90a build";
  std::mt19937 rng(808);
  check_against_cpu(Case{1, 2048, 4, 1, 128, 700}, DType::BF16, 1e-2, rng, true);
  for (const Case& c : {Case{2, 2048, 8, 2, 128, 0}, Case{1, 4096, 4, 1, 128, 0},
                        Case{2, 2048, 6, 2, 128, 300, 4}, Case{1, 4096, 8, 8, 128, 1500},
                        Case{1, 1000, 8, 1, 128, 0}}) {
    SCOPED_TRACE(case_str(c, DType::BF16));
    const GpuInputs in(c, rng);
    GpuRun runs[2];
    for (int i = 0; i < 2; ++i) {
      Switch<bool> forward(ops::cuda_attention::set_hopper_forward, i == 0);
      Switch<bool> backward(ops::cuda_attention::set_hopper_backward, i == 0);
      ASSERT_EQ(ops::cuda_attention::uses_hopper_forward(in.q, in.k, c.seq), i == 0);
      ASSERT_EQ(ops::cuda_attention::uses_hopper_backward(in.q, in.k, c.seq), i == 0);
      runs[i] = in.run(c.seq);
    }
    EXPECT_LT(test::rel_error(runs[0].out, runs[1].out), 1e-2) << "out";
    EXPECT_LT(test::rel_error(runs[0].lse, runs[1].lse), 1e-4) << "lse";
    // The backward alone: the wgmma one from the mma.sync forward's out and lse.
    Switch<bool> backward(ops::cuda_attention::set_hopper_backward, true);
    GpuRun& h = runs[0];
    ops::cuda::attention_backward(in.dout, in.q, in.k, in.v, runs[1].out, runs[1].lse, in.ds, c.seq, in.scale, h.dq,
                                  h.dk, h.dv);
    EXPECT_LT(test::rel_error(h.dq, runs[1].dq), 1e-2) << "dq";
    EXPECT_LT(test::rel_error(h.dk, runs[1].dk), 1e-2) << "dk";
    EXPECT_LT(test::rel_error(h.dv, runs[1].dv), 1e-2) << "dv";
  }
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
