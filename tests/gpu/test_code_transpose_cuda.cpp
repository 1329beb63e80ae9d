// The CUDA byte transpose against the CPU reference, bit for bit: the vector kernel's shapes
// (multiples of 16, whole and partial 64×128 tiles, Llama projections) and the fallback's (odd
// shapes, one row or column, misaligned views) and the projection sizes (`loft bench kernels`
// times them); and FALQON's and HALO's dX through the shared scratch
// on the GPU, bit-identical to the GEMM on the transposed copy they used to keep (issue 15).
#include <gtest/gtest.h>

#include <random>

#include "engine/quant/code_transpose.h"
#include "tests/common/test_util.h"
#include "tests/engine/transpose_dx_check.h"

namespace loft {
namespace {

const Device kGpu = Device::cuda(0);

Tensor random_bytes(const Shape& shape, DType dt, std::mt19937& rng) {
  std::vector<uint8_t> v(size_t(shape_numel(shape)));
  for (auto& b : v) b = uint8_t(rng());
  return Tensor::from_host(v.data(), shape, dt);
}

void expect_same_as_cpu(const Tensor& src_cpu, const Tensor& src_gpu, const std::string& what) {
  Tensor dst = Tensor::empty({src_gpu.size(1), src_gpu.size(0)}, src_gpu.dtype(), kGpu);
  quant::transpose_codes(src_gpu, dst);
  EXPECT_TRUE(test::code_bytes(dst) == test::code_bytes(quant::transpose_codes(src_cpu))) << what;
}

TEST(CodeTransposeCuda, MatchesTheCpuBitForBit) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(1);
  for (const Shape& s : {Shape{17, 33}, Shape{1, 4096}, Shape{4096, 1}, Shape{1, 1}, Shape{3, 5},
                         Shape{172, 64}, Shape{64, 172}, Shape{16, 16}, Shape{64, 128}, Shape{80, 144},
                         Shape{144, 80}, Shape{1008, 48}, Shape{4096, 4096}, Shape{14336, 4096},
                         Shape{4096, 14336}, Shape{13824, 5120}, Shape{1024, 4096}})
    for (DType dt : {DType::U8, DType::F8_E4M3, DType::I8, DType::F8_E5M2}) {
      if (dt != DType::U8 && s[0] * s[1] > (1 << 20)) continue;  // the bytes are what is tested
      const Tensor src = random_bytes(s, dt, rng);
      expect_same_as_cpu(src, src.to(kGpu), cat(shape_str(s), " ", dtype_name(dt)));
    }
  // Views 1 and 16 bytes into a buffer: multiples of 16 but misaligned (the fallback), and aligned.
  for (int64_t offset : {1, 16}) {
    const Shape s{48, 64};
    const Tensor flat = random_bytes({offset + 48 * 64}, DType::U8, rng);
    const Tensor view_cpu = flat.slice(offset, 48 * 64).view(s);
    const Tensor view_gpu = flat.to(kGpu).slice(offset, 48 * 64).view(s);
    expect_same_as_cpu(view_cpu, view_gpu, cat("view at byte ", offset));
  }
}

// Each projection size of llama-7b/13b and llama3-8b.
TEST(CodeTransposeCuda, ProjectionSizesMatchTheCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(2);
  for (const Shape& s : {Shape{4096, 4096}, Shape{11008, 4096}, Shape{4096, 11008}, Shape{1024, 4096},
                         Shape{14336, 4096}, Shape{4096, 14336}, Shape{5120, 5120}, Shape{13824, 5120},
                         Shape{5120, 13824}}) {
    const Tensor host = random_bytes(s, DType::F8_E4M3, rng), src = host.to(kGpu);
    Tensor dst = Tensor::empty({s[1], s[0]}, DType::F8_E4M3, kGpu);
    quant::transpose_codes(src, dst);
    EXPECT_TRUE(test::code_bytes(dst) == test::code_bytes(quant::transpose_codes(host))) << shape_str(s);
  }
}

TEST(CodeTransposeCuda, FalqonAndHaloDxMatchTheResidentTransposeBitForBit) {
  LOFT_REQUIRE_GPU();
  // 256×128 / T 64 takes cuBLASLt's FP8 and INT8 paths; the odd shapes the decode fallback.
  test::expect_dx_as_with_a_resident_transpose(kGpu, {{256, 128, 64}, {172, 64, 33}, {7, 33, 5}, {512, 256, 32}});
}

}  // namespace
}  // namespace loft
