// YAML recipes for `loft finetune --config FILE.yaml`: a CLI11 config formatter that reads the
// file with yaml-cpp and turns its keys into finetune's options. Keys are loft's own option names
// (--foo-bar as foo_bar, for every option finetune registers, including ones added later) or the
// names axolotl and Unsloth use where they mean the same thing (base_model, datasets,
// sequence_len, micro_batch_size, ...). Options given on the command line override the file.
// An unknown key, a value the option's check refuses, a key that is not a plain name or a second
// YAML document is a usage error naming the file, line and key.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace loft::app {

class YamlRecipe : public CLI::Config {
 public:
  // `command`: the subcommand the recipe configures (finetune); its options decide which keys exist.
  YamlRecipe(std::string file, CLI::App* command) : file_(std::move(file)), command_(command) {}
  std::vector<CLI::ConfigItem> from_config(std::istream& in) const override;
  std::string to_config(const CLI::App*, bool, bool, std::string) const override;

 private:
  std::string file_;
  CLI::App* command_;  // not const: its options' validators check each value (CLI11 has no const access)
};

// True for a --config path that names a YAML file (.yaml or .yml).
bool is_yaml_config(std::string_view path);

// The key a recipe uses for the option of long name `long_name` ("lora-rank" -> "lora_rank").
std::string recipe_key(std::string_view long_name);
// Options a recipe neither sets nor records: how this process runs, not what the run is
// (help, config, resume, overwrite, plan).
bool is_run_control(std::string_view long_name);

}  // namespace loft::app
