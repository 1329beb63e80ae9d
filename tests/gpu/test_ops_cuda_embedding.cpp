// Embedding lookup (exact copies), its backward with repeated ids, and the error an
// out-of-range id raises (naming the position, leaving the device usable).
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

struct EmbCase {
  int64_t vocab, dim, tokens;
};
const EmbCase kCases[] = {{7, 8, 1}, {7, 172, 300}, {512, 4096, 33}, {1000, 173, 65}};

TEST(EmbeddingCuda, ForwardCopiesRows) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(61);
  for (DType dt : kActivationDtypes)
    for (const EmbCase& c : kCases) {
      Tensor table = to_gpu(random_tensor({c.vocab, c.dim}, rng), dt);
      Tensor ids = random_ids({c.tokens}, int32_t(c.vocab), rng);
      Tensor out = Tensor::empty({c.tokens, c.dim}, dt, kGpu);
      Tensor cout = Tensor::empty({c.tokens, c.dim}, DType::F32);
      ops::embedding(cpu_f32(table), ids, cout);
      ops::embedding(table, ids.to(kGpu), out);
      EXPECT_EQ(out.to_float_vector(), cout.to_float_vector())
          << name(dt) << " V=" << c.vocab << " D=" << c.dim << " T=" << c.tokens;
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

TEST(EmbeddingCuda, BackwardAccumulatesRepeatedIds) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(62);
  for (DType dt : kActivationDtypes)
    for (const EmbCase& c : kCases) {
      Tensor dout = to_gpu(random_tensor({c.tokens, c.dim}, rng), dt);
      Tensor ids = random_ids({c.tokens}, int32_t(c.vocab), rng);
      Tensor dt0 = random_tensor({c.vocab, c.dim}, rng);
      Tensor cdtable = dt0.clone(), dtable = dt0.to(kGpu);
      ops::embedding_backward(cpu_f32(dout), ids, cdtable);
      ops::embedding_backward(dout, ids.to(kGpu), dtable);
      EXPECT_LT(rel_error(dtable, cdtable), 1e-5)
          << name(dt) << " V=" << c.vocab << " D=" << c.dim << " T=" << c.tokens;
    }
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
