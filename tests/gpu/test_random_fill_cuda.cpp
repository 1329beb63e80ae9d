// fill_random on CUDA writes exactly the CPU's values: F32 bit for bit, BF16 as the CPU's F32
// values rounded to nearest even, for odd sizes, several seeds and a row view at an offset.
// (Values compare as floats: widening BF16 is exact and no value is ±0 or NaN, so == is bit
// equality here.)
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

// The CPU's values for `n` elements, as a tensor of dtype `dt` must hold them.
std::vector<float> cpu_values(int64_t n, uint64_t seed, float std, DType dt) {
  Tensor t = Tensor::empty({n}, DType::F32);
  ops::fill_random(t, seed, std);
  std::vector<float> out = t.to_float_vector();
  if (dt == DType::BF16)
    for (float& f : out) f = bf16_to_f32(f32_to_bf16(f));
  return out;
}

TEST(FillRandomCuda, MatchesCpuBitExact) {
  LOFT_REQUIRE_GPU();
  const int64_t sizes[] = {1, 7, 172, 4099, (1 << 20) + 3};
  const uint64_t seeds[] = {0, 1, 0x9E3779B97F4A7C15ull};
  for (DType dt : kActivationDtypes)
    for (int64_t n : sizes)
      for (uint64_t seed : seeds)
        for (float std : {0.02f, 1.0f}) {
          Tensor g = Tensor::empty({n}, dt, kGpu);
          ops::fill_random(g, seed, std);
          ASSERT_EQ(g.to_float_vector(), cpu_values(n, seed, std, dt))
              << name(dt) << " n=" << n << " seed=" << seed << " std=" << std;
        }
}

TEST(FillRandomCuda, RowViewAtAnOffsetMatchesAFreshTensor) {
  LOFT_REQUIRE_GPU();
  for (DType dt : kActivationDtypes) {
    Tensor m = Tensor::zeros({5, 173}, dt, kGpu);
    Tensor rows = m.slice(2, 2);  // starts 346 elements in: not 16-byte aligned
    ops::fill_random(rows, 42, 0.02f);
    const std::vector<float> all = m.to_float_vector();
    const std::vector<float> want = cpu_values(2 * 173, 42, 0.02f, dt);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), all.begin() + 2 * 173)) << name(dt);
    EXPECT_EQ(all[2 * 173 - 1], 0.0f) << name(dt);
    EXPECT_EQ(all[4 * 173], 0.0f) << name(dt);
  }
}

}  // namespace
}  // namespace loft::test
