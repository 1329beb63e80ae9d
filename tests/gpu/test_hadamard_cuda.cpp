// CUDA Hadamard transform against the CPU reference: F32 and BF16, forward and inverse, Llama
// widths including block-diagonal ones (172, 11008), odd row counts, in place and round trips.
#include "engine/quant/hadamard.h"
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

const int64_t kWidths[] = {64, 172, 768, 4096, 5632, 11008, 13824, 14336};
const int64_t kRows[] = {1, 7, 33};

TEST(HadamardCuda, MatchesCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(41);
  for (DType dt : kActivationDtypes)
    for (int64_t n : kWidths)
      for (int64_t rows : kRows)
        for (bool inverse : {false, true}) {
          const Tensor x = to_gpu(random_tensor({rows, n}, rng, -2.0f, 2.0f), dt);
          Tensor y = Tensor::empty(x.shape(), dt, kGpu);
          quant::hadamard_transform(x, y, inverse);
          const Tensor cx = cpu_f32(x);
          Tensor cy = Tensor::empty(cx.shape(), DType::F32);
          quant::hadamard_transform(cx, cy, inverse);
          EXPECT_LT(rel_error(y, cy), tol(dt))
              << name(dt) << " rows " << rows << (inverse ? " inverse " : " forward ")
              << quant::plan_for(n).describe();
        }
}

// The kernels run the CPU's butterflies and K-mix sums in its order: F32 results are the CPU's
// bit for bit, on the register-resident path (every width here but 172) as on the general one;
// orders from kTensorCoreMixOrder on (13824) mix on tensor cores, to fp32 accuracy
// (test_hadamard_kmix_mma_cuda.cpp).
TEST(HadamardCuda, F32BitIdenticalToCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(44);
  // Powers of two 2^8..2^14 cover each register-resident mode (one warp; one exchange of 2, 4 or 8
  // positions at 16 and 32 elements per thread).
  std::vector<int64_t> widths(std::begin(kWidths), std::end(kWidths));
  for (int64_t n : {256, 512, 1024, 2048, 8192, 16384}) widths.push_back(n);
  for (int64_t n : widths) {
    if (quant::plan_for(n).k >= quant::kTensorCoreMixOrder) continue;
    for (int64_t rows : {int64_t(1), int64_t(9)})
      for (bool inverse : {false, true}) {
        const Tensor cx = random_tensor({rows, n}, rng, -3.0f, 3.0f);
        Tensor y = Tensor::empty(cx.shape(), DType::F32, kGpu);
        quant::hadamard_transform(to_gpu(cx, DType::F32), y, inverse);
        Tensor cy = Tensor::empty(cx.shape(), DType::F32);
        quant::hadamard_transform(cx, cy, inverse);
        EXPECT_EQ(y.to_float_vector(), cy.to_float_vector())
            << "rows " << rows << (inverse ? " inverse " : " forward ") << quant::plan_for(n).describe();
      }
  }
}

TEST(HadamardCuda, InPlaceEqualsOutOfPlace) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(42);
  for (DType dt : kActivationDtypes)
    for (int64_t n : {172, 768, 14336}) {
      const Tensor x = to_gpu(random_tensor({2, 3, n}, rng), dt);
      Tensor y = Tensor::empty(x.shape(), dt, kGpu);
      quant::hadamard_transform(x, y);
      Tensor inplace = x.clone();
      quant::hadamard_transform(inplace, inplace);
      EXPECT_EQ(inplace.to_float_vector(), y.to_float_vector()) << name(dt) << " n=" << n;
    }
}

TEST(HadamardCuda, RoundTripIsIdentity) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(43);
  for (int64_t n : kWidths) {
    const Tensor x = to_gpu(random_tensor({5, n}, rng), DType::F32);
    Tensor y = Tensor::empty(x.shape(), DType::F32, kGpu);
    quant::hadamard_transform(x, y);
    EXPECT_GT(rel_error(y, x), 0.5) << "n=" << n;  // it did rotate
    quant::hadamard_transform(y, y, /*inverse=*/true);
    EXPECT_LT(rel_error(y, x), 1e-5) << "n=" << n;
  }
}

TEST(HadamardCuda, RejectsOtherDtypes) {
  LOFT_REQUIRE_GPU();
  const Tensor x = Tensor::zeros({3, 64}, DType::F16, kGpu);
  try {
    quant::hadamard_transform(x, x);
    ADD_FAILURE() << "F16 accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "F32 or BF16"));
  }
}

}  // namespace
}  // namespace loft::test
