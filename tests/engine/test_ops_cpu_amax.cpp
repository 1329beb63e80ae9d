// The ops' amax outputs on the CPU (engine/ops/op_list.def, "*_amax"): each amax is max |output|
// exactly and leaves the outputs as they are; a larger prior value is kept; and the quantizer
// given an amax writes the codes and scale it writes without one.
#include <gtest/gtest.h>

#include "engine/quant/quantize.h"
#include "tests/common/amax_op_runs.h"

namespace loft {
namespace {

TEST(OpsCpuAmax, EachAmaxIsItsOutputsLargestMagnitude) {
  for (auto [rows, cols, head_dim] : {std::tuple{3, 1030, 10}, std::tuple{5, 512, 128}})
    test::check_amax_runs(test::amax_runs(Device::cpu(), DType::F32, rows, cols, head_dim, false, 7),
                          cat(rows, "x", cols));
}

TEST(OpsCpuAmax, ALargerPriorValueIsKept) {
  std::mt19937 rng(3);
  const Tensor g = test::random_tensor({4, 9}, rng), u = test::random_tensor({4, 9}, rng);
  Tensor out = Tensor::empty({4, 9}, DType::F32);
  Tensor amax = Tensor::from_vector(std::vector<float>{1e30f}, {1});
  ops::swiglu(g, u, out, &amax);
  EXPECT_EQ(amax.to_float_vector()[0], 1e30f);
}

TEST(OpsCpuAmax, AnAmaxOfTheWrongShapeOrDtypeIsRefused) {
  std::mt19937 rng(4);
  const Tensor g = test::random_tensor({4, 9}, rng), u = test::random_tensor({4, 9}, rng);
  Tensor out = Tensor::empty({4, 9}, DType::F32), two = Tensor::zeros({2}, DType::F32);
  Tensor i32 = Tensor::zeros({1}, DType::I32);
  try {
    ops::swiglu(g, u, out, &two);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "out_amax"));
  }
  EXPECT_THROW(ops::swiglu(g, u, out, &i32), Error);
}

TEST(OpsCpuAmax, QuantizeGivenTheAmaxWritesTheSameCodes) {
  std::mt19937 rng(5);
  for (auto format : {quant::LowpFormat::E4M3, quant::LowpFormat::E5M2}) {
    const Tensor x = test::random_tensor({6, 40}, rng, -3.0f, 3.0f);
    const Tensor amax = Tensor::from_vector(std::vector<float>{test::stored_amax(x)}, {1});
    const auto a = quant::quantize(x, format, true), b = quant::quantize(x, format, true, &amax);
    EXPECT_TRUE(test::same_bytes(b.codes, a.codes));
    EXPECT_TRUE(test::same_bytes(b.codes_t, a.codes_t));
    EXPECT_TRUE(test::same_bytes(b.scale, a.scale));
  }
}

}  // namespace
}  // namespace loft
