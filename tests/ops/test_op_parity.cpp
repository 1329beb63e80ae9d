// The parity harness on the CPU: the table covers every op, every row runs at every size, and
// every backward op matches central finite differences of its forward op (tests/ops/cases).
// tests/ops/gpu runs the same rows on CUDA against these CPU results.
#include <cmath>
#include <set>

#include "tests/common/test_util.h"
#include "tests/ops/cases/op_cases.h"

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
    if (!c.backward_of.empty()) {
      EXPECT_TRUE(table.count(c.backward_of)) << c.op << " is the backward of an unknown op";
      EXPECT_TRUE(c.loss) << c.op;
    }
  }
  for (const std::string& op : names) EXPECT_TRUE(rows.count(op)) << op << " has no row in tests/ops/cases";
  for (const std::string& op : names)  // every *_backward op is checked against differences
    if (op.size() > 9 && op.compare(op.size() - 9, 9, "_backward") == 0)
      for (const OpCase& c : op_cases())
        if (c.op == op) EXPECT_FALSE(c.backward_of.empty()) << op << " has no finite-difference check";
}

TEST(OpParity, EveryRowRunsOnTheCpuAtEverySizeAndRepeatsItself) {
  for (const OpCase& c : op_cases())
    for (size_t i = 0; i < c.sizes.size(); ++i) {
      std::mt19937 rng(1000 + uint32_t(i));
      const Tensors in = c.make(c.sizes[i], rng);
      const Tensors a = c.run(in, Device::cpu(), DType::F32), b = c.run(in, Device::cpu(), DType::F32);
      ASSERT_EQ(a.size(), b.size()) << c.op;
      for (size_t o = 0; o < a.size(); ++o) {
        EXPECT_TRUE(same_bytes(a[o], b[o])) << c.op << " size " << i << " output " << o;
        for (float v : a[o].to_float_vector()) ASSERT_TRUE(std::isfinite(v)) << c.op << " size " << i << " output " << o;
      }
    }
}

TEST(OpParity, BackwardOpsMatchFiniteDifferencesOnTheCpu) {
  EXPECT_GT(expect_backward_matches_differences(Device::cpu(), 2000), 20);
}

}  // namespace
}  // namespace loft::test::parity
