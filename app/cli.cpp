#include <iostream>

#include "app/commands.h"
#include "engine/core/error.h"

namespace loft::app {

CLI::Option* add_device_option(CLI::App& cmd, std::string& device) {
  device = "auto";
  return cmd.add_option("--device", device, "auto, cpu, cuda or cuda:N")
      ->capture_default_str();
}

void build_cli(CLI::App& root) {
  root.description("loft: LoRA fine-tuning of Llama models on one GPU (FALQON, HALO, QLoRA, LoRA)");
  root.set_version_flag("--version", std::string("loft ") + LOFT_VERSION);
  root.set_config("--config", "", "read options from a TOML/INI file ([command] sections)");
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
  add_pending_commands(root);
}

int run_cli(int argc, const char* const* argv) {
  CLI::App root;
  build_cli(root);
  try {
    root.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return root.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return root.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return root.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "loft: error: " << e.what() << "\n(run 'loft --help' for usage)\n";
    return 2;
  } catch (const UsageError& e) {
    std::cerr << "loft: error: " << e.what() << '\n';
    return 2;
  } catch (const Error& e) {
    std::cerr << "loft: error: " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "loft: internal error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}

}  // namespace loft::app
