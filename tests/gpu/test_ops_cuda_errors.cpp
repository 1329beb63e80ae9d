// The CUDA ops' error paths: an out-of-range id or target raises an error naming where it is
// (the kernels flag it on the device), and the device stays usable. Their results against the CPU
// are the parity harness's (tests/ops/gpu).
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

TEST(CrossEntropyCuda, OutOfRangeTargetThrowsNamingRow) {
  LOFT_REQUIRE_GPU();
  for (int32_t bad : {512, -5}) {
    std::vector<int32_t> t{1, 2, ops::kIgnoreIndex, bad, 4};
    Tensor logits = Tensor::zeros({5, 512}, DType::BF16, kGpu);
    Tensor losses = Tensor::empty({5}, DType::F32, kGpu);
    try {
      ops::cross_entropy(logits, Tensor::from_vector(t, {5}, kGpu), losses, &logits);
      ADD_FAILURE() << "target " << bad << " did not throw";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("row 3"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
    }
  }
}

TEST(EmbeddingCuda, OutOfRangeIdThrowsNamingPosition) {
  LOFT_REQUIRE_GPU();
  for (int32_t bad : {-1, 512, 1 << 30}) {
    std::vector<int32_t> v(20, 3);
    v[5] = bad;
    v[11] = bad;  // the error names the first one
    Tensor table = Tensor::zeros({512, 16}, DType::BF16, kGpu);
    Tensor out = Tensor::empty({20, 16}, DType::BF16, kGpu);
    try {
      ops::embedding(table, Tensor::from_vector(v, {20}, kGpu), out);
      ADD_FAILURE() << "id " << bad << " did not throw";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("position 5"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
    }
  }
  // The device is still usable afterwards.
  std::vector<int32_t> ok(4, 1);
  Tensor table = Tensor::from_vector(std::vector<float>(32, 2.0f), {2, 16}, kGpu);
  Tensor out = Tensor::empty({4, 16}, DType::F32, kGpu);
  ops::embedding(table, Tensor::from_vector(ok, {4}, kGpu), out);
  EXPECT_EQ(out.to_float_vector(), std::vector<float>(64, 2.0f));
}

TEST(EmbeddingCuda, BackwardOutOfRangeIdThrows) {
  LOFT_REQUIRE_GPU();
  std::vector<int32_t> v{0, 1, 9, 2};
  Tensor dout = Tensor::zeros({4, 8}, DType::F32, kGpu);
  Tensor dtable = Tensor::zeros({9, 8}, DType::F32, kGpu);
  EXPECT_THROW(ops::embedding_backward(dout, Tensor::from_vector(v, {4}, kGpu), dtable), Error);
}

}  // namespace
}  // namespace loft::test
