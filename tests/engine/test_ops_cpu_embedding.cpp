// CPU embedding: lookup, scatter-add backward (repeated ids, accumulation) against finite
// differences of L = Σ r⊙table[ids] on the double reference, and the out-of-range id error.
#include "engine/ops/ops.h"
#include "tests/engine/test_ops_cpu_util.h"

namespace loft {
namespace {

std::vector<double> embedding_ref(const std::vector<double>& table, const std::vector<int32_t>& ids,
                                  int64_t d) {
  std::vector<double> out;
  for (int32_t id : ids)
    out.insert(out.end(), table.begin() + id * d, table.begin() + (id + 1) * d);
  return out;
}

TEST(OpsCpuEmbedding, ForwardCopiesRows) {
  std::mt19937 rng(51);
  for (auto [v, d, t] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {17, 7, 9}, {300, 172, 33}}) {
    Tensor table = test::random_tensor({v, d}, rng);
    Tensor ids = test::random_ids({t}, int32_t(v), rng);
    Tensor out = Tensor::empty({t, d}, DType::F32);
    ops::embedding(table, ids, out);
    std::vector<int32_t> idv;
    for (int64_t id : ids.to_int_vector()) idv.push_back(int32_t(id));
    EXPECT_EQ(test::rel_error_ref(out, embedding_ref(test::to_double(table), idv, d)), 0.0);
  }
}

// A BF16 table (a GPU model's host-side embedding) is gathered as bytes: every output row is its
// table row bit for bit, through the threaded path too (an [8192, 600] BF16 batch is 9.4 MiB).
TEST(OpsCpuEmbedding, Bf16RowsAreCopiedBitForBit) {
  std::mt19937 rng(53);
  for (auto [v, d, t] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {17, 7, 9}, {4099, 600, 8192}}) {
    std::vector<uint16_t> bits(size_t(v * d));
    for (uint16_t& b : bits) b = uint16_t(rng());
    Tensor table = Tensor::from_host(bits.data(), {v, d}, DType::BF16);
    Tensor ids = test::random_ids({t}, int32_t(v), rng);
    Tensor out = Tensor::empty({t, d}, DType::BF16);
    ops::embedding(table, ids, out);
    const auto* o = out.ptr<uint16_t>();
    const std::vector<int64_t> idv = ids.to_int_vector();
    int64_t wrong = 0;
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < d; ++j) wrong += o[i * d + j] != bits[size_t(idv[size_t(i)] * d + j)];
    EXPECT_EQ(wrong, 0) << v << "x" << d << ", " << t << " tokens";
  }
}

TEST(OpsCpuEmbedding, BackwardMatchesFiniteDifferencesAndAccumulates) {
  std::mt19937 rng(52);
  const int64_t v = 11, d = 13;
  const std::vector<int32_t> idv = {3, 0, 3, 10, 7, 3, 0};  // repeats must add up
  const int64_t t = int64_t(idv.size());
  Tensor table = test::random_tensor({v, d}, rng);
  Tensor r = test::random_tensor({t, d}, rng);  // L = Σ r⊙out
  Tensor dtable0 = test::random_tensor({v, d}, rng), dtable = dtable0.clone();
  ops::embedding_backward(r, Tensor::from_vector(idv, {t}), dtable);
  const auto rd = test::to_double(r);
  const auto fd = test::fd_gradient(test::to_double(table), [&](const auto& tab) {
    return test::dot(rd, embedding_ref(tab, idv, d));
  });
  std::vector<float> got = dtable.to_float_vector(), start = dtable0.to_float_vector();
  for (size_t i = 0; i < got.size(); ++i) got[i] -= start[i];
  EXPECT_LT(test::rel_error(got, std::vector<float>(fd.begin(), fd.end())), 1e-5);
}

TEST(OpsCpuEmbedding, OutOfRangeIdNamesPosition) {
  Tensor table = Tensor::zeros({10, 4}, DType::F32);
  Tensor out = Tensor::empty({5, 4}, DType::F32);
  for (int32_t bad : {10, -1}) {
    Tensor ids = Tensor::from_vector(std::vector<int32_t>{1, 2, 9, bad, 0}, {5});
    try {
      ops::embedding(table, ids, out);
      ADD_FAILURE() << "no error for id " << bad;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("token 3"), std::string::npos) << msg;
      EXPECT_NE(msg.find("id " + std::to_string(bad)), std::string::npos) << msg;
    }
    EXPECT_THROW(ops::embedding_backward(out, ids, table), Error);
  }
  EXPECT_EQ(ops::sum(table), 0.0);  // the failed backward wrote nothing
}

}  // namespace
}  // namespace loft
