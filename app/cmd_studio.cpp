// loft studio: the local web UI (studio/). This file only registers the command and its options.
#include <CLI/CLI.hpp>

#include "app/commands.h"
#include "studio/run_studio.h"

namespace loft::app {

void add_studio_command(CLI::App& root) {
  auto o = std::make_shared<studio::StudioOptions>();
  CLI::App* cmd = root.add_subcommand("studio", "a local web UI: models, data, training runs, evaluation, chat, export");
  cmd->add_option("--port", o->port, "TCP port (0: any free port)")->capture_default_str();
  cmd->add_option("--host", o->host,
                  "address to listen on; a non-loopback one serves other machines (with the token)")
      ->capture_default_str();
  cmd->add_option("--root", o->roots, "a folder whose models and data the studio may read (repeatable; default .)");
  cmd->add_option("--runs", o->runs, "the folder of run folders (finetune's --out)")->capture_default_str();
  cmd->add_option("--token", o->token, "the access token (default: 32 random bytes from /dev/urandom)");
  cmd->add_flag("--open", o->open, "open the URL in a browser (xdg-open)");
  cmd->callback([o] { studio::run_studio(*o); });
}

}  // namespace loft::app
