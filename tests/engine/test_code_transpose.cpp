// quant::transpose_codes (the CPU reference) at awkward shapes and every byte dtype, its operand
// errors, the shared TransposeScratch (one per device, grown to the largest request, views that
// outlive a growth), and FALQON's and HALO's dX through it: bit-identical to the GEMM on the
// transposed copy they used to keep (issue 15).
#include <gtest/gtest.h>

#include <random>

#include "engine/quant/code_transpose.h"
#include "engine/quant/transpose_scratch.h"
#include "tests/common/test_util.h"
#include "tests/engine/transpose_dx_check.h"

namespace loft {
namespace {

Tensor random_bytes(const Shape& shape, DType dt, std::mt19937& rng) {
  std::vector<uint8_t> v(size_t(shape_numel(shape)));
  for (auto& b : v) b = uint8_t(rng());
  return Tensor::from_host(v.data(), shape, dt);
}

TEST(CodeTranspose, EveryByteLandsAtItsTransposedPlace) {
  std::mt19937 rng(1);
  for (const Shape& s : {Shape{17, 33}, Shape{1, 4096}, Shape{4096, 1}, Shape{1, 1}, Shape{64, 128},
                         Shape{80, 144}, Shape{172, 64}})
    for (DType dt : {DType::U8, DType::I8, DType::F8_E4M3, DType::F8_E5M2}) {
      const Tensor src = random_bytes(s, dt, rng);
      const Tensor dst = quant::transpose_codes(src);
      ASSERT_EQ(dst.shape(), Shape({s[1], s[0]}));
      ASSERT_EQ(dst.dtype(), dt);
      const auto* a = src.ptr<uint8_t>();
      const auto* b = dst.ptr<uint8_t>();
      int bad = 0;
      for (int64_t i = 0; i < s[0]; ++i)
        for (int64_t j = 0; j < s[1]; ++j) bad += b[j * s[0] + i] != a[i * s[1] + j];
      EXPECT_EQ(bad, 0) << shape_str(s) << " " << dtype_name(dt);
      EXPECT_EQ(test::code_bytes(quant::transpose_codes(dst)), test::code_bytes(src)) << "twice is the identity";
    }
  const Tensor empty = Tensor::empty({0, 5}, DType::U8);
  EXPECT_EQ(quant::transpose_codes(empty).shape(), Shape({5, 0}));
}

TEST(CodeTranspose, BadOperandsAreRefused) {
  const Tensor src = Tensor::zeros({4, 6}, DType::U8);
  Tensor wrong_shape = Tensor::empty({4, 6}, DType::U8), wrong_dtype = Tensor::empty({6, 4}, DType::I8);
  EXPECT_THROW(quant::transpose_codes(src, wrong_shape), Error);
  EXPECT_THROW(quant::transpose_codes(src, wrong_dtype), Error);
  Tensor f32 = Tensor::zeros({4, 6}, DType::F32), f32_t = Tensor::empty({6, 4}, DType::F32);
  EXPECT_THROW(quant::transpose_codes(f32, f32_t), Error);
  EXPECT_THROW(quant::transpose_codes(Tensor::zeros({24}, DType::U8)), Error);
  Tensor square = Tensor::zeros({4, 4}, DType::U8);
  try {
    quant::transpose_codes(square, square);
    ADD_FAILURE() << "in place must be refused";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "overlaps"));
  }
}

TEST(TransposeScratch, OneBufferPerDeviceGrownToTheLargest) {
  std::mt19937 rng(2);
  auto s = quant::TransposeScratch::of(Device::cpu());
  EXPECT_EQ(quant::TransposeScratch::of(Device::cpu()), s) << "shared while held";
  const Tensor big = random_bytes({40, 24}, DType::F8_E4M3, rng), small = random_bytes({3, 5}, DType::I8, rng);
  const Tensor t_big = s->transposed(big);
  EXPECT_EQ(s->capacity(), 960u);
  EXPECT_EQ(test::code_bytes(t_big), test::code_bytes(quant::transpose_codes(big)));
  const Tensor t_small = s->transposed(small);
  EXPECT_EQ(s->capacity(), 960u) << "a smaller request reuses the buffer";
  EXPECT_EQ(t_small.dtype(), DType::I8);
  EXPECT_EQ(test::code_bytes(t_small), test::code_bytes(quant::transpose_codes(small)));
  // Growing hands out a new buffer; a view taken before keeps the old one alive and intact.
  const Tensor bigger = random_bytes({50, 30}, DType::U8, rng);
  const Tensor t_prev = s->transposed(big);
  const Tensor t_bigger = s->transposed(bigger);
  EXPECT_EQ(s->capacity(), 1500u);
  EXPECT_EQ(test::code_bytes(t_prev), test::code_bytes(quant::transpose_codes(big)));
  EXPECT_EQ(test::code_bytes(t_bigger), test::code_bytes(quant::transpose_codes(bigger)));
  EXPECT_THROW(s->transposed(Tensor::zeros({8}, DType::U8)), Error);
  s.reset();
  EXPECT_EQ(quant::TransposeScratch::of(Device::cpu())->capacity(), 0u) << "freed with its last holder";
}

TEST(TransposeScratch, FalqonAndHaloDxMatchTheResidentTransposeBitForBit) {
  test::expect_dx_as_with_a_resident_transpose(Device::cpu(),
                                               {{48, 80, 16}, {7, 33, 5}, {96, 64, 9}, {1, 17, 3}});
}

}  // namespace
}  // namespace loft
