// YAML recipes (finetune --config FILE.yaml): the docs' recipe trains, a run's config.yaml repeats
// it exactly, command-line options override the file, axolotl's names map to loft's options, and a
// mistake is one line naming the file, the line and the key.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "app/recipe.h"
#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

fs::path src() { return test::source_dir(); }
std::string model() { return (src() / "examples" / "stories260K").string(); }
std::string demo() { return (src() / "examples" / "demo.jsonl").string(); }

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

std::vector<double> losses(const fs::path& run) {
  std::vector<double> out;
  for (const auto& m : test::read_jsonl(run / "metrics.jsonl")) out.push_back(m["loss"]);
  return out;
}

// The options a recipe sets, read by YamlRecipe against the real finetune command.
std::map<std::string, std::vector<std::string>> recipe_items(const std::string& yaml) {
  CLI::App root;
  app::build_cli(root);
  CLI::App* ft = root.get_subcommand("finetune");
  ft->callback({});
  root.parse(std::string("finetune --model m --data d"), false);  // parsed, nothing run
  std::istringstream in(yaml);
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& item : app::YamlRecipe("r.yaml", ft).from_config(in)) {
    EXPECT_EQ(item.parents, std::vector<std::string>{"finetune"});
    out[item.name] = item.inputs;
  }
  return out;
}

std::string recipe_error(const std::string& yaml) {
  try {
    recipe_items(yaml);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Recipe, DocsRecipeTrainsWithCommandLineOverrides) {
  test::TempDir dir;
  const auto r = test::run_cli_captured({"finetune", "--config", (src() / "docs" / "recipes" / "stories260k-lora.yaml").string(),
                                         "--model", model(), "--data", demo(), "--steps", "6", "--out",
                                         (dir / "run").string(), "--device", "cpu", "--no-report"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(losses(dir / "run").size(), 6u);  // --steps 6 over the file's max_steps 30
  EXPECT_TRUE(test::contains(r.out, "batch      8 rows = 4 x 2 accumulation, seq 128"));
  EXPECT_TRUE(test::contains(r.out, "schedule   cosine lr 0.005, warmup 3, 6 steps"));
  EXPECT_TRUE(test::contains(r.out, "lora r=16 alpha=32 on 4 projection kinds"));
  const std::string cfg = test::read_text(dir / "run" / "config.yaml");
  for (const char* line : {"format: alpaca\n", "lora_targets: q_proj,k_proj,v_proj,o_proj\n", "micro_batch: 4\n",
                           "batch: 8\n", "val_fraction: 0.2\n", "seed: 42\n", "steps: 6\n", "report: false\n"})
    EXPECT_TRUE(test::contains(cfg, line));
  EXPECT_FALSE(fs::exists(dir / "run" / "report.html"));
}

TEST(Recipe, ResolvedConfigRepeatsTheRun) {
  test::TempDir dir;
  const auto first = test::run_cli_captured({"finetune", "--model", model(), "--data", demo(), "--steps", "8",
                                             "--batch", "4", "--seq", "128", "--lora-rank", "4", "--seed", "3",
                                             "--val-fraction", "0.25", "--out", (dir / "a").string(), "--device", "cpu"});
  ASSERT_EQ(first.code, 0) << first.err;
  const std::string cfg = test::read_text(dir / "a" / "config.yaml");
  // Values the run decided (the method's defaults) are written out, run control is not.
  for (const char* line : {"lr: ", "schedule: ", "warmup: ", "lora_alpha: ", "method: lora\n", "max_grad_norm: "})
    EXPECT_TRUE(test::contains(cfg, line));
  EXPECT_FALSE(test::contains(cfg, "overwrite"));
  const auto again = test::run_cli_captured(
      {"finetune", "--config", (dir / "a" / "config.yaml").string(), "--out", (dir / "b").string()});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(losses(dir / "a"), losses(dir / "b"));
  std::string cfg_b = test::read_text(dir / "b" / "config.yaml");
  cfg_b.replace(cfg_b.find((dir / "b").string()), (dir / "b").string().size(), (dir / "a").string());
  EXPECT_EQ(cfg_b, cfg) << "the repeated run's config is the first one's";
}

TEST(Recipe, AxolotlNamesMapToLoftOptions) {
  const auto items = recipe_items(R"(base_model: some/model
datasets:
  - path: a.jsonl
    type: sharegpt
  - path: b.jsonl
    type: sharegpt
    weight: 2
test_datasets: [v.jsonl]
sequence_len: 256
micro_batch_size: 2
gradient_accumulation_steps: 8
learning_rate: 2.0e-4
lr_scheduler: cosine
num_epochs: 3
warmup_steps: 10
lora_r: 32
lora_alpha: 64
lora_dropout: 0.0
lora_target_linear: true
output_dir: runs/x
val_set_size: 0.05
chat_template: chatml
gradient_checkpointing: true
halo_level: 1
train_on_inputs: false
empty_is_unset:
)" "");
  using V = std::vector<std::string>;
  EXPECT_EQ(items.at("model"), V{"some/model"});
  EXPECT_EQ(items.at("data"), (V{"a.jsonl", "b.jsonl:2"}));
  EXPECT_EQ(items.at("format"), V{"sharegpt"});
  EXPECT_EQ(items.at("val-data"), V{"v.jsonl"});
  EXPECT_EQ(items.at("seq"), V{"256"});
  EXPECT_EQ(items.at("micro-batch"), V{"2"});
  EXPECT_EQ(items.at("batch"), V{"16"});
  EXPECT_EQ(items.at("lr"), V{"2.0e-4"});
  EXPECT_EQ(items.at("schedule"), V{"cosine"});
  EXPECT_EQ(items.at("epochs"), V{"3"});
  EXPECT_EQ(items.at("warmup"), V{"10"});
  EXPECT_EQ(items.at("lora-rank"), V{"32"});
  EXPECT_EQ(items.at("lora-alpha"), V{"64"});
  EXPECT_EQ(items.at("lora-targets"), V{"all"});
  EXPECT_EQ(items.at("out"), V{"runs/x"});
  EXPECT_EQ(items.at("val-fraction"), V{"0.05"});
  EXPECT_EQ(items.at("template"), V{"chatml"});
  EXPECT_EQ(items.at("grad-checkpointing"), V{"true"});
  EXPECT_EQ(items.at("halo-level"), V{"1"});  // loft's own names, generically
  EXPECT_EQ(items.at("train-on-inputs"), V{"false"});
}

TEST(Recipe, MistakesAreOneLineErrorsNamingFileLineAndKey) {
  EXPECT_EQ(recipe_error("base_model: m\nlerning_rate: 0.1\n"),
            "r.yaml:2: unknown key 'lerning_rate' for loft finetune (did you mean 'learning_rate'?)");
  EXPECT_EQ(recipe_error("wandb_project: x\n"), "r.yaml:1: unknown key 'wandb_project' for loft finetune");
  EXPECT_EQ(recipe_error("resume: true\n"), "r.yaml:1: unknown key 'resume' for loft finetune");
  EXPECT_EQ(recipe_error("lora_r: 8\nlora_rank: 16\n"), "r.yaml:2: 'lora_rank' sets --lora-rank, which 'lora_r' (line 1) already sets");
  EXPECT_EQ(recipe_error("datasets:\n  - path: a\n    typ: alpaca\n"),
            "r.yaml:3: unknown key 'typ' in a 'datasets' entry (path, type, weight)");
  EXPECT_TRUE(test::contains(recipe_error("datasets:\n  - path: a\n    type: orpo\n"), "r.yaml:3: dataset type 'orpo'"));
  EXPECT_TRUE(test::contains(recipe_error("lora_dropout: 0.05\n"), "r.yaml:1: lora_dropout 0.05: loft trains without LoRA dropout"));
  EXPECT_TRUE(test::contains(recipe_error("gradient_accumulation_steps: 4\n"), "r.yaml:1: gradient_accumulation_steps needs micro_batch_size"));
  EXPECT_TRUE(test::contains(recipe_error("val_set_size: 200\n"), "r.yaml:1: 'val_set_size' is a fraction"));
  EXPECT_TRUE(test::contains(recipe_error("- a\n- b\n"), "r.yaml:1: a recipe is a mapping"));
  EXPECT_TRUE(test::contains(recipe_error("lr: [1\n"), "r.yaml:2:1: "));  // yaml-cpp's own parse error
  // Through the CLI: exit code 2 and one line; a recipe is for finetune only.
  test::TempDir dir;
  write(dir / "typo.yaml", "base_model: m\ndatasets: [d.jsonl]\nnum_epoch: 2\n");
  const auto r = test::run_cli_captured({"finetune", "--config", (dir / "typo.yaml").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "loft: error: " + (dir / "typo.yaml").string() +
                       ":3: unknown key 'num_epoch' for loft finetune (did you mean 'num_epochs'?)\n");
  const auto other = test::run_cli_captured({"info", "--model", model(), "--config", (dir / "typo.yaml").string()});
  EXPECT_EQ(other.code, 2);
  EXPECT_TRUE(test::contains(other.err, "a YAML recipe configures loft finetune"));
}

}  // namespace
}  // namespace loft
