// --halo-transposed (HaloOptions::transposed, engine/peft/transposed_codes.h): a dense HALO weight
// that keeps its codes transposed gives the products of one that transposes them in each backward
// bit for bit at every level and format, holds one byte a weight more, and auto resolves to keep
// only where the plan says the memory allows it (never for an NF4 backbone, which has no codes to
// keep); keep with an NF4 backbone and a value the option does not know are refused by name.
#include "engine/peft/halo_weight.h"
#include "engine/peft/method.h"
#include "engine/peft/method_spec.h"
#include "tests/common/test_util.h"
#include "tests/common/transposed_codes_checks.h"

namespace loft {
namespace {

TEST(HaloTransposed, KeptCodesGiveThePerStepProductsBitForBit) {
  std::mt19937 rng(11);
  const Tensor w = test::random_tensor({48, 32}, rng, -0.5f, 0.5f);
  const Tensor x = test::random_tensor({13, 32}, rng), dy = test::random_tensor({13, 48}, rng);
  for (int level : {0, 1, 2})
    for (quant::LowpFormat f : {quant::LowpFormat::E4M3, quant::LowpFormat::INT8}) {
      SCOPED_TRACE(cat("level ", level, " ", quant::format_name(f)));
      const auto per_step = halo_weight(w.clone(), {level, f, HaloBackbone::Dense, TransposedCodes::per_step});
      const auto keep = halo_weight(w.clone(), {level, f, HaloBackbone::Dense, TransposedCodes::keep});
      EXPECT_EQ(keep->stored_bytes(), per_step->stored_bytes() + 48 * 32) << "one byte a weight more";
      EXPECT_EQ(keep->stored_tensors().size(), per_step->stored_tensors().size() + 1)
          << "the kept codes shard with the backbone (--shard-backbone)";
      Tensor y[2], dx[2];
      int i = 0;
      for (const auto* hw : {per_step.get(), keep.get()}) {
        y[i] = Tensor::empty({13, 48}, DType::F32);
        dx[i] = Tensor::empty({13, 32}, DType::F32);
        hw->forward(x, y[i]);
        hw->backward_input(dy, dx[i], false);
        ++i;
      }
      EXPECT_EQ(y[0].to_float_vector(), y[1].to_float_vector());
      EXPECT_EQ(dx[0].to_float_vector(), dx[1].to_float_vector());
    }
}

TEST(HaloTransposed, AutoKeepsOnlyWhereThePlanSaysItFits) {
  test::expect_auto_keeps_only_where_it_fits("halo", &HaloOptions::transposed);
  MethodOptions nf4;
  nf4.method = "halo";
  nf4.get<HaloOptions>().backbone = HaloBackbone::Nf4;
  method_spec("halo").resolve_memory_choices(nf4, [](const MethodOptions&) -> bool {
    ADD_FAILURE() << "an NF4 backbone has no transposed codes to keep";
    return true;
  });
  EXPECT_EQ(nf4.get<HaloOptions>().transposed, TransposedCodes::per_step);
}

TEST(HaloTransposed, BadValuesAndKeepWithNf4AreRefusedByName) {
  const std::vector<MethodFlag> flags = method_spec("halo").flags();
  const MethodFlag* flag = test::method_flag_named(flags, "--halo-transposed");
  ASSERT_NE(flag, nullptr);
  MethodOptions m{"halo", {8, 16.0f}, parse_lora_targets("all")};
  flag->set(m, "per-step");
  EXPECT_EQ(flag->get(m), "per-step");
  try {
    flag->set(m, "always");
    ADD_FAILURE() << "accepted 'always'";
  } catch (const UsageError& e) {
    EXPECT_TRUE(test::contains(e.what(), "--halo-transposed")) << e.what();
  }
  m.get<HaloOptions>().backbone = HaloBackbone::Nf4;
  m.get<HaloOptions>().transposed = TransposedCodes::keep;
  std::mt19937_64 rng(0);
  try {
    make_linear_factory(m, rng);
    ADD_FAILURE() << "took --halo-transposed keep with --backbone nf4";
  } catch (const UsageError& e) {
    EXPECT_TRUE(test::contains(e.what(), "--halo-transposed")) << e.what();
  }
}

}  // namespace
}  // namespace loft
