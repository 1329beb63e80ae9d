// A YAML recipe (`finetune --config RECIPE.yaml`) through app/recipe.cpp's reader, against a
// finetune-like command carrying the same kinds of options and checks (app/option_checks.h):
// every input must give config items or one UsageError line, never a yaml-cpp exception.
#include <sstream>

#include "app/option_checks.h"
#include "app/recipe.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

struct Command {
  CLI::App root;
  CLI::App* finetune = nullptr;
  std::string text;
  std::vector<std::string> list;
  int64_t integer = 0;
  double number = 0;
  bool flag = false;

  Command() {
    finetune = root.add_subcommand("finetune");
    for (const char* o : {"--model", "--format", "--method", "--schedule", "--out", "--template", "--lora-targets"})
      finetune->add_option(o, text);
    finetune->add_option("--data", list);
    finetune->add_option("--val-data", list);
    finetune->add_option("--seq", integer)->check(loft::app::seq_bound());
    finetune->add_option("--batch", integer)->check(loft::app::rows_bound());
    finetune->add_option("--micro-batch", integer)->check(loft::app::rows_bound());
    finetune->add_option("--lora-rank", integer)->check(loft::app::rank_bound());
    finetune->add_option("--seed", integer)->check(loft::app::seed_bound());
    finetune->add_option("--steps", integer)->check(loft::app::int_in(1));
    finetune->add_option("--warmup", integer)->check(loft::app::int_in(0));
    finetune->add_option("--lr", number)->check(loft::app::positive_finite());
    finetune->add_option("--weight-decay", number)->check(loft::app::non_negative_finite());
    finetune->add_option("--val-fraction", number)->check(loft::app::fraction_below(0, 1));
    finetune->add_flag("--grad-checkpointing", flag);
    finetune->add_flag("--packing,!--no-packing", flag);
    finetune->add_flag("--resume", flag);  // run control: never a recipe key
    root.parse("finetune", false);          // the reader configures a command that was given
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Command cmd;
  std::istringstream in{std::string(loft::fuzz::text(data, size))};
  loft::fuzz::expect_clean([&] {
    const auto items = loft::app::YamlRecipe("recipe.yaml", cmd.finetune).from_config(in);
    for (const CLI::ConfigItem& item : items)
      if (item.name.empty()) __builtin_trap();  // every item names an option
  });
  return 0;
}
