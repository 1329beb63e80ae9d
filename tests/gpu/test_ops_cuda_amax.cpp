// The ops' amax outputs on the GPU (engine/ops/op_list.def, "*_amax"): each amax is max |output|
// as stored, exactly (the bf16 rounding included), and leaves the outputs' bytes as they are, on
// the vectorised and the element-wise paths (16-byte aligned rows, or a view one element in),
// in F32 and BF16; a larger prior value is kept; and the quantizer given an amax writes the codes
// and scale it writes without one.
#include <gtest/gtest.h>

#include "engine/quant/quantize.h"
#include "tests/common/amax_op_runs.h"

namespace loft {
namespace {

TEST(OpsCudaAmax, EachAmaxIsItsOutputsLargestMagnitude) {
  LOFT_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16})
    for (bool offset : {false, true})
      for (auto [rows, cols, head_dim] :
           {std::tuple{3, 1030, 10}, std::tuple{37, 4096, 128}, std::tuple{130, 1024, 64}})
        test::check_amax_runs(
            test::amax_runs(Device::cuda(0), dt, rows, cols, head_dim, offset, 11),
            cat(dtype_name(dt), " ", rows, "x", cols, offset ? " offset" : ""));
}

TEST(OpsCudaAmax, ALargerPriorValueIsKept) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(3);
  const Tensor g = test::random_tensor({64, 512}, rng).to(Device::cuda(0));
  const Tensor u = test::random_tensor({64, 512}, rng).to(Device::cuda(0));
  Tensor out = Tensor::empty({64, 512}, DType::F32, Device::cuda(0));
  Tensor amax = Tensor::from_vector(std::vector<float>{1e30f}, {1}).to(Device::cuda(0));
  ops::swiglu(g, u, out, &amax);
  EXPECT_EQ(amax.to_float_vector()[0], 1e30f);
}

TEST(OpsCudaAmax, QuantizeGivenTheAmaxWritesTheSameCodes) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(5);
  for (auto format : {quant::LowpFormat::E4M3, quant::LowpFormat::E5M2})
    for (auto [rows, cols] : {std::pair{64, 256}, std::pair{33, 70}}) {
      Tensor x = Tensor::empty({rows, cols}, DType::BF16, Device::cuda(0));
      ops::convert(test::random_tensor({rows, cols}, rng, -3.0f, 3.0f).to(Device::cuda(0)), x);
      const Tensor amax = Tensor::from_vector(std::vector<float>{test::stored_amax(x)}, {1}).to(Device::cuda(0));
      const auto a = quant::quantize(x, format, true), b = quant::quantize(x, format, true, &amax);
      EXPECT_TRUE(test::same_bytes(b.codes, a.codes)) << rows << "x" << cols;
      EXPECT_TRUE(test::same_bytes(b.codes_t, a.codes_t)) << rows << "x" << cols;
      EXPECT_TRUE(test::same_bytes(b.scale, a.scale)) << rows << "x" << cols;
    }
}

}  // namespace
}  // namespace loft
