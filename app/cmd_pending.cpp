// Commands whose issue has not landed yet. Each parses its common options (so --help is useful)
// and then says plainly that it is not built, exiting 1: no fake output.
#include <array>

#include "app/commands.h"
#include "engine/core/error.h"
#include "engine/tensor/device.h"

namespace loft::app {

namespace {
struct Pending {
  const char* name;
  const char* what;
  const char* issue;
  bool computes;
};
// Empty while every command is built; a later issue's command goes here until it lands.
constexpr std::array<Pending, 0> kPending{};
}  // namespace

void add_pending_commands(CLI::App& root) {
  for (const Pending& p : kPending) {
    CLI::App* cmd = root.add_subcommand(p.name, p.what);
    auto device = std::make_shared<std::string>();
    if (p.computes) add_device_option(*cmd, *device);
    cmd->allow_extras();
    cmd->callback([p, device] {
      if (p.computes) resolve_device(*device);  // still reject a bad --device value
      throw Error(cat("'loft ", p.name, "' is not built yet (", p.issue, " work is pending)"));
    });
  }
}

}  // namespace loft::app
