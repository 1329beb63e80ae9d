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
