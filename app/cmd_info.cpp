// loft info: placeholder until the checkpoint loader lands (replaced by the loader work).
#include "app/commands.h"
#include "engine/core/error.h"

namespace loft::app {

void add_info_command(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand("info", "describe a checkpoint and its memory needs");
  cmd->callback([] { throw Error("'loft info' is not built yet"); });
}

}  // namespace loft::app
