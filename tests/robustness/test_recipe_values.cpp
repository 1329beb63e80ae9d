// YAML recipe values (app/recipe.cpp) are read whole and checked where they enter: a number with
// junk after it, a fraction where a count belongs, a product past 64 bits, a key that is a list,
// a second document: each is one usage error naming the file, the line and the key.
#include "tests/robustness/robustness_util.h"

namespace loft {
namespace {

using test::expect_failure;

// A recipe that would train stories260K on the demo data, plus `extra` lines.
std::vector<std::string> with_recipe(const test::TempDir& dir, const std::string& extra) {
  const auto file = dir / "recipe.yaml";
  test::write_file(file, "base_model: " + test::stories() + "\ndatasets:\n  - path: " + test::demo_data() +
                             "\n    type: alpaca\nsequence_len: 128\nmax_steps: 2\noutput_dir: " +
                             (dir / "run").string() + "\n" + extra);
  return {"finetune", "--config", file.string(), "--device", "cpu"};
}

TEST(Robustness, RecipeNumbersAreReadWhole) {
  test::TempDir dir;
  const std::string file = (dir / "recipe.yaml").string();
  // Line 8 is the first extra line.
  expect_failure(with_recipe(dir, "micro_batch_size: 4.5\n"), 2, {file + ":8:", "micro_batch_size", "4.5"});
  expect_failure(with_recipe(dir, "micro_batch_size: 4abc\n"), 2, {file + ":8:", "micro_batch_size", "4abc"});
  expect_failure(with_recipe(dir, "micro_batch_size: 2\ngradient_accumulation_steps: 4.5\n"), 2,
                 {file + ":9:", "gradient_accumulation_steps", "4.5"});
  expect_failure(with_recipe(dir, "micro_batch_size: 2\ngradient_accumulation_steps: 1e3x\n"), 2,
                 {file + ":9:", "gradient_accumulation_steps"});
  expect_failure(with_recipe(dir, "lora_dropout: 0abc\n"), 2, {file + ":8:", "lora_dropout 0abc"});
  expect_failure(with_recipe(dir, "learning_rate: 1e-3x\n"), 2, {file + ":8:", "learning_rate", "--lr"});
  expect_failure(with_recipe(dir, "warmup_steps: 4abc\n"), 2, {file + ":8:", "warmup_steps"});
  expect_failure(with_recipe(dir, "seed: -1\n"), 2, {file + ":8:", "seed", "at least 0"});
}

TEST(Robustness, RecipeBatchProductIsChecked) {
  test::TempDir dir;
  const std::string file = (dir / "recipe.yaml").string();
  // The product overflows 64 bits for some values and merely exceeds --batch's bound for others.
  expect_failure(with_recipe(dir, "micro_batch_size: 1048576\ngradient_accumulation_steps: 9223372036854775807\n"),
                 2, {file + ":9:", "micro_batch_size x gradient_accumulation_steps overflows 64 bits"});
  expect_failure(with_recipe(dir, "micro_batch_size: 1024\ngradient_accumulation_steps: 1048576\n"), 2,
                 {file + ":9:", "--batch 1073741824", "from 1 to 1048576"});
  expect_failure(with_recipe(dir, "micro_batch_size: 2\ngradient_accumulation_steps: 0\n"), 2,
                 {file + ":9:", "gradient_accumulation_steps must be an integer of at least 1"});
}

TEST(Robustness, RecipeShapesAreOneLineErrors) {
  test::TempDir dir;
  const std::string file = (dir / "recipe.yaml").string();
  expect_failure(with_recipe(dir, "? [a, b]\n: 1\n"), 2, {file + ":8:", "a key must be a plain name"});
  expect_failure(with_recipe(dir, "? {a: 1}\n: 1\n"), 2, {file + ":8:", "a key must be a plain name"});
  expect_failure(with_recipe(dir, "datasets2:\n  ? [x]\n  : 1\n"), 2, {file});
  expect_failure(with_recipe(dir, "learning_rate: [1, [2]]\n"), 2, {file + ":8:", "learning_rate"});
  expect_failure(with_recipe(dir, "learning_rate: {a: 1}\n"), 2, {file + ":8:", "learning_rate"});
  expect_failure(with_recipe(dir, "---\nlearning_rate: 0.1\n"), 2, {file, "second YAML document"});
  expect_failure(with_recipe(dir, "learning_rate: [unclosed\n"), 2, {file});
  // yaml-cpp's LoadAll never returned on this stream (found by fuzz_recipe); it must fail at once.
  test::write_file(dir / "hang.yaml", ",r: 9\n---\x13lor\" 4\n");
  expect_failure({"finetune", "--config", (dir / "hang.yaml").string()}, 2,
                 {(dir / "hang.yaml").string() + ":1", "second YAML document"});
}

}  // namespace
}  // namespace loft
