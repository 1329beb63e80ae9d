// convert (bit-exact round-to-nearest-even for every F32/BF16/F16 pair), axpy and scale against
// the CPU, including sizes that leave a scalar tail and views too misaligned to vectorise.
#include <cstring>

#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

const int64_t kSizes[] = {1, 7, 172, 4099, (1 << 16) + 3};

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Random values plus exact rounding ties for bf16 and f16, a subnormal f16 and an f16 overflow.
std::vector<float> convert_inputs(int64_t n, std::mt19937& rng) {
  std::vector<float> v = random_tensor({n}, rng, -1000.0f, 1000.0f).to_float_vector();
  const float specials[] = {from_bits(0x3f808000u),
                            from_bits(0x3f818000u),
                            1.0f + 1.0f / 2048,
                            1.0f + 3.0f / 2048,
                            -(1.0f + 3.0f / 2048),
                            3e-6f,
                            7e4f,
                            0.0f};
  for (size_t i = 0; i < std::size(specials) && i < v.size(); ++i)
    v[v.size() - 1 - i] = specials[i];
  return v;
}

// What dst must hold, bit for bit, after converting `vals` (exactly representable in src).
std::vector<uint32_t> expected_bits(const std::vector<float>& vals, DType dst) {
  std::vector<uint32_t> out;
  for (float f : vals) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    out.push_back(dst == DType::F32 ? u : dst == DType::BF16 ? f32_to_bf16(f) : f32_to_f16(f));
  }
  return out;
}

std::vector<uint32_t> bits_of(const Tensor& t) {
  const Tensor h = t.to(Device::cpu());
  std::vector<uint32_t> out(size_t(h.numel()));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = h.dtype() == DType::F32 ? h.ptr<uint32_t>()[i] : h.ptr<uint16_t>()[i];
  return out;
}

TEST(ConvertCuda, AllPairsRoundToNearestEvenBitExact) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(21);
  const DType types[] = {DType::F32, DType::BF16, DType::F16};
  for (int64_t n : kSizes)
    for (DType s : types)
      for (DType d : types) {
        const std::vector<float> vals = convert_inputs(n, rng);
        Tensor f32 = Tensor::from_vector(vals, {n}).to(kGpu);
        Tensor src = Tensor::empty({n}, s, kGpu);
        ops::convert(f32, src);
        Tensor dst = Tensor::empty({n}, d, kGpu);
        ops::convert(src, dst);
        const std::vector<uint32_t> want = expected_bits(src.to_float_vector(), d);
        const std::vector<uint32_t> got = bits_of(dst);
        int64_t wrong = 0, first = -1;
        for (size_t i = 0; i < got.size(); ++i)
          if (got[i] != want[i] && wrong++ == 0) first = int64_t(i);
        EXPECT_EQ(wrong, 0) << name(s) << "->" << name(d) << " n=" << n << " first bad index "
                            << first;
      }
}

TEST(AxpyCuda, MatchesCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(22);
  for (DType dt : kActivationDtypes)
    for (int64_t n : kSizes) {
      Tensor x = to_gpu(random_tensor({n}, rng), dt), y = to_gpu(random_tensor({n}, rng), dt);
      Tensor cx = cpu_f32(x), cy = cpu_f32(y);
      ops::axpy(-0.75f, cx, cy);
      ops::axpy(-0.75f, x, y);
      EXPECT_LT(rel_error(y, cy), tol(dt)) << name(dt) << " n=" << n;
    }
}

TEST(AxpyCuda, MisalignedViews) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(23);
  for (DType dt : kActivationDtypes) {
    Tensor xb = to_gpu(random_tensor({1001}, rng), dt), yb = to_gpu(random_tensor({1002}, rng), dt);
    Tensor x = xb.slice(1, 1000), y = yb.slice(2, 1000);
    Tensor cx = cpu_f32(x), cy = cpu_f32(y);
    const std::vector<float> before = yb.slice(0, 2).to_float_vector();
    ops::axpy(2.0f, cx, cy);
    ops::axpy(2.0f, x, y);
    EXPECT_LT(rel_error(y, cy), tol(dt)) << name(dt);
    EXPECT_EQ(yb.slice(0, 2).to_float_vector(), before) << "elements before the view changed";
  }
}

TEST(ScaleCuda, MatchesCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(24);
  for (DType dt : kActivationDtypes)
    for (int64_t n : kSizes) {
      Tensor x = to_gpu(random_tensor({n}, rng), dt);
      Tensor cx = cpu_f32(x);
      ops::scale(cx, 0.3f);
      ops::scale(x, 0.3f);
      EXPECT_LT(rel_error(x, cx), tol(dt)) << name(dt) << " n=" << n;
    }
}

}  // namespace
}  // namespace loft::test
