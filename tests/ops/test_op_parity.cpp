// The parity harness on the CPU: the table covers every op, every row runs at every size, and
// every backward op matches central finite differences of its forward op (engine/ops/cases).
// tests/ops/gpu runs the same rows on CUDA against these CPU results.
#include <cmath>
#include <set>

#include "tests/ops/harness/parity_checks.h"

namespace loft::test::parity {
namespace {

TEST(OpParity, EveryOpOfTheTableHasOneRow) {
  const std::vector<std::string> names = op_table_names();
  const std::set<std::string> table(names.begin(), names.end());
  EXPECT_EQ(table.size(), names.size()) << "an op is listed twice in op_list.def";
  std::set<std::string> rows;
  for (const OpCase& c : op_cases()) {
    EXPECT_TRUE(table.count(c.op)) << "row " << c.op << " names no op of op_list.def";
    EXPECT_TRUE(rows.insert(c.op).second) << "two rows for " << c.op;
    EXPECT_GE(c.sizes.size(), 3u) << c.op << ": several sizes, awkward ones included";
    for (const Sizes& s : c.sizes) EXPECT_EQ(s.size(), c.dims.size()) << label(c, s) << ": a name per entry";
    if (!c.backward_of.empty()) {
      EXPECT_TRUE(table.count(c.backward_of)) << c.op << " is the backward of an unknown op";
      EXPECT_TRUE(c.loss) << c.op;
    }
  }
  for (const std::string& op : names) EXPECT_TRUE(rows.count(op)) << op << " has no row in engine/ops/cases";
  for (const std::string& op : names)  // every *_backward op is checked against differences
    if (op.size() > 9 && op.compare(op.size() - 9, 9, "_backward") == 0)
      for (const OpCase& c : op_cases())
        if (c.op == op) {
          EXPECT_FALSE(c.backward_of.empty()) << op << " has no finite-difference check";
        }
}

TEST(OpParity, EveryRowRunsOnTheCpuAtEverySizeAndRepeatsItself) {
  for (const OpCase& c : op_cases())
    for (size_t i = 0; i < c.sizes.size(); ++i) {
      std::mt19937 rng(1000 + uint32_t(i));
      const Tensors in = c.make(c.sizes[i], rng);
      const Tensors a = run_once(c, in, Device::cpu(), DType::F32), b = run_once(c, in, Device::cpu(), DType::F32);
      ASSERT_EQ(a.size(), b.size()) << c.op;
      for (size_t o = 0; o < a.size(); ++o) {
        EXPECT_TRUE(same_bytes(a[o], b[o])) << label(c, c.sizes[i]) << " output " << o;
        for (float v : a[o].to_float_vector()) ASSERT_TRUE(std::isfinite(v)) << label(c, c.sizes[i]) << " output " << o;
      }
    }
}

TEST(OpParity, ExactCasesHoldOnTheCpu) { EXPECT_GE(expect_exact_cases(Device::cpu()), 13); }

TEST(OpParity, BackwardOpsMatchFiniteDifferencesOnTheCpu) {
  EXPECT_GT(expect_backward_matches_differences(Device::cpu(), 2000), 20);
}

// `loft bench kernels` times every op of the table at one layer's sizes (app/bench_kernels.cpp):
// each row gives them and their cost, or says why it is not timed; at the tiny shape's layer the
// sizes run.
TEST(OpParity, EveryOpIsTimedAtALayerOrSaysWhyNot) {
  const LayerSizes tiny{.batch = 2, .seq = 16, .hidden = 64, .intermediate = 172, .heads = 8, .kv_heads = 4,
                        .head_dim = 8, .vocab = 512, .loss_rows = 32};
  for (const OpCase& c : op_cases()) {
    if (!c.not_timed.empty()) continue;
    ASSERT_TRUE(c.layer_sizes && c.cost) << c.op << ": no layer size for bench kernels, and no not_timed";
    const std::vector<Sizes> sizes = c.layer_sizes(tiny);
    EXPECT_FALSE(sizes.empty()) << c.op;
    for (const Sizes& s : sizes) {
      ASSERT_EQ(s.size(), c.dims.size()) << label(c, s);
      const Cost cost = c.cost(s, 4);
      EXPECT_TRUE(cost.bytes > 0 || cost.flops > 0) << label(c, s);
      std::mt19937 rng(7);
      EXPECT_FALSE(run_once(c, c.make(s, rng), Device::cpu(), DType::F32).empty()) << label(c, s);
    }
  }
}

}  // namespace
}  // namespace loft::test::parity
