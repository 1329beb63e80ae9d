// --falqon-transposed (FalqonOptions::Transposed): a projection that keeps its backbone codes
// transposed trains bit for bit as one that transposes them in each backward, the kept copy stays
// the transpose of the updated backbone through the row updates and a method-state reload, and
// auto resolves to keep only where the plan says the memory allows it.
#include "engine/methods/falqon/falqon_linear.h"
#include "engine/optim/adamw.h"
#include "engine/peft/method_spec.h"
#include "tests/common/test_util.h"
#include "tests/common/transposed_codes_checks.h"
#include "tests/engine/test_quant_fp8_reference.h"

namespace loft {
namespace {

using Transposed = FalqonOptions::Transposed;

struct Trained {
  std::vector<float> b, dx;
  std::vector<uint8_t> codes;
};

// `steps` steps of one projection [out, in] with FALQON's update after each, on fixed inputs.
Trained train(FalqonLinear& l, int steps) {
  std::mt19937 rng(9);
  AdamW opt(l.params(), {});
  Trained r;
  for (int s = 0; s < steps; ++s) {
    const Tensor x = test::random_tensor({13, l.in_features()}, rng);
    const Tensor dy = test::random_tensor({13, l.out_features()}, rng);
    Tensor y = Tensor::empty({13, l.out_features()}, DType::F32), dx = Tensor::empty(x.shape(), DType::F32);
    LinearSaved saved;
    l.forward(x, y, &saved);
    l.backward(dy, saved, dx, false);
    opt.step(5e-2);
    l.after_step();
    r.dx = dx.to_float_vector();
  }
  r.b = l.buffer().value.to_float_vector();
  r.codes = test::code_bytes(l.melded_codes());
  return r;
}

TEST(FalqonTransposed, KeptCodesTrainAsPerStepAndStayTheBackbonesTranspose) {
  std::mt19937 rng(3);
  for (auto buffer : {FalqonOptions::Buffer::reset, FalqonOptions::Buffer::accumulate}) {
    const Tensor w = test::random_tensor({40, 24}, rng, -0.5f, 0.5f);
    FalqonLinear per_step("m", w, 4, {.topk = 3, .buffer = buffer, .transposed = Transposed::per_step});
    FalqonLinear keep("m", w, 4, {.topk = 3, .buffer = buffer, .transposed = Transposed::keep});
    EXPECT_FALSE(per_step.kept_transposed().defined());
    ASSERT_TRUE(keep.kept_transposed().defined());
    const Trained a = train(per_step, 5), b = train(keep, 5);
    EXPECT_EQ(a.b, b.b);
    EXPECT_EQ(a.dx, b.dx);
    EXPECT_EQ(a.codes, b.codes);
    EXPECT_NE(a.codes, test::code_bytes(FalqonLinear("m", w, 4, {}).melded_codes()))
        << "the test means the updates to change rows";
    EXPECT_EQ(test::code_bytes(keep.kept_transposed()), test::code_bytes(keep.transposed_codes()));
  }
}

// A layer rebuilt from the base and the method state keeps the transpose of the restored rows.
TEST(FalqonTransposed, KeptCodesFollowARestoredMethodState) {
  std::mt19937 rng(5);
  const Tensor w = test::random_tensor({40, 24}, rng, -0.5f, 0.5f);
  FalqonLinear trained("m", w, 4, {.topk = 3, .transposed = Transposed::keep});
  train(trained, 4);
  FalqonLinear fresh("m", w, 4, {.topk = 3, .transposed = Transposed::keep});
  fresh.load_method_state(trained.method_state());
  EXPECT_EQ(test::code_bytes(fresh.melded_codes()), test::code_bytes(trained.melded_codes()));
  EXPECT_EQ(test::code_bytes(fresh.kept_transposed()), test::code_bytes(trained.transposed_codes()));
}

TEST(FalqonTransposed, AutoKeepsOnlyWhereThePlanSaysItFits) {
  test::expect_auto_keeps_only_where_it_fits("falqon", &FalqonOptions::transposed);
}

TEST(FalqonTransposed, TheOptionNamesItsValues) {
  const std::vector<MethodFlag> flags = method_spec("falqon").flags();
  const MethodFlag* flag = test::method_flag_named(flags, "--falqon-transposed");
  ASSERT_NE(flag, nullptr);
  MethodOptions m;
  m.method = "falqon";
  for (const char* v : {"per-step", "keep", "auto"}) {
    flag->set(m, v);
    EXPECT_EQ(flag->get(m), v);
  }
  EXPECT_EQ(m.get<FalqonOptions>().transposed, Transposed::auto_choice);
  try {
    flag->set(m, "always");
    FAIL() << "accepted 'always'";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--falqon-transposed"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loft
