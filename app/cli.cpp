#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "app/commands.h"
#include "app/gpu_memory_limit.h"
#include "app/interrupt.h"
#include "app/option_checks.h"
#include "app/recipe.h"
#include "engine/core/failure.h"
#include "engine/io/json_read.h"
#include "datasets/record.h"

namespace loft::app {

CLI::Option* add_device_option(CLI::App& cmd, std::string& device) {
  device = "auto";
  CLI::Option* opt = cmd.add_option("--device", device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  add_gpu_memory_limit_option(cmd, device);  // after --device: its callback reads the device
  return opt;
}

CLI::Option* add_grad_bucket_option(CLI::App& cmd, int64_t& mib) {
  return cmd.add_option("--grad-bucket-mib", mib,
                        "data parallel: the adapter gradients are summed in buckets of up to N MiB, "
                        "each sent as soon as the backward finishes it; 0: every bucket after the "
                        "backward (no overlap)")
      ->capture_default_str()->transform(int_in(0, 4096));
}

void build_cli(CLI::App& root) {
  root.description("loft: LoRA fine-tuning of Llama models on one GPU (FALQON, HALO, QLoRA, LoRA)");
  root.set_version_flag("--version", std::string("loft ") + LOFT_VERSION);
  root.set_config("--config", "", "read options from a TOML/INI file ([command] sections), or a YAML recipe for finetune");
  root.require_subcommand(1);
  root.fallthrough();
  add_info_command(root);
  add_finetune_command(root);
  add_evaluate_command(root);
  add_generate_command(root);
  add_data_command(root);
  add_tokenize_command(root);
  add_bench_command(root);
  add_export_command(root);
  add_report_command(root);
  add_studio_command(root);
}

namespace {

// CLI11 silently ignores a --config file it cannot read as TOML/INI lines (a binary file gave
// no options at all); refuse anything that is not UTF-8 text. A .yaml/.yml file is a finetune
// recipe, read by YamlRecipe instead of CLI11's TOML reader.
void check_config_files(CLI::App& root, int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i], file;
    if (a == "--config" && i + 1 < argc) file = argv[i + 1];
    else if (a.starts_with("--config=")) file = a.substr(9);
    else continue;
    std::error_code ec;
    if (std::filesystem::is_directory(std::filesystem::path(file), ec))  // reading it would throw from the stream
      throw UsageError(cat("--config ", brief(file), " is a folder; name a TOML/INI/YAML file"));
    std::ifstream in{std::string(file), std::ios::binary};
    if (!in) continue;  // CLI11 reports a missing file
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find('\0') != std::string::npos || data::find_invalid_utf8(text))
      throw UsageError(cat("--config ", brief(file), ": not a text TOML/INI/YAML file"));
    if (is_yaml_config(file))
      root.config_formatter(std::make_shared<YamlRecipe>(std::string(file), root.get_subcommand("finetune")));
  }
}

}  // namespace

int run_cli(int argc, const char* const* argv) {
  const std::vector<std::string> args = legacy_bench_args({argv, argv + argc}, std::cerr);
  std::vector<const char*> arg_ptrs;
  for (const std::string& a : args) arg_ptrs.push_back(a.c_str());
  argc = int(arg_ptrs.size());
  argv = arg_ptrs.data();
  CLI::App root;
  build_cli(root);
  try {
    check_config_files(root, argc, argv);
    root.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return root.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return root.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return root.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (what.rfind(": ", 0) == 0) what.erase(0, 2);  // a hidden option's error (hidden_alias names it)
    std::cerr << "loft: error: " << what << "\n(run 'loft --help' for usage)\n";
    return 2;
  } catch (const Interrupted& e) {  // finetune stopped on Ctrl-C/SIGTERM after its checkpoint
    std::cerr << "loft: " << e.what() << '\n';
    return e.exit_code();
  } catch (...) {  // every other failure: one line, exit 1 (runtime) or 2 (usage)
    const FailureReport r = report_current_exception();
    std::cerr << "loft: error: " << r.message << '\n';
    return r.exit_code;
  }
  return 0;
}

}  // namespace loft::app
