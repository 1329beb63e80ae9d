// RUN/config.yaml: the options a finetune run ran with, as a YAML recipe that
// `loft finetune --config RUN/config.yaml --out NEW` repeats. Written generically from the
// command's CLI11 options (so options other engineers add appear without edits here).
#pragma once
#include <map>
#include <string>

#include "app/cli_fwd.h"

namespace loft::app {

// Every configurable option of `cmd` under its recipe key (--foo-bar as foo_bar): the value given
// (command line or --config), else `resolved`'s value for it (what the run decided, e.g. a
// method's default learning rate; keyed by long name without dashes), else its default when it
// has one; options with none of these are listed in a closing comment. Run-control options
// (--resume, --overwrite) are left out.
std::string resolved_config_yaml(const CLI::App& cmd, const std::map<std::string, std::string>& resolved);

}  // namespace loft::app
