// The argument vector of an evaluate, export or chat job from its request body: each key names an
// option of that loft command (`max_new_tokens` -> --max-new-tokens; an unknown key is a 400
// naming it), values become `--option=value` (one argv element, never split or read as another
// option), paths are resolved under the roots (403 outside), and the whole vector is parsed by the
// command's own CLI definition before the job is queued.
#pragma once
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "studio/paths.h"

namespace loft::studio {

struct JobArgsRule {
  std::string command;            // "evaluate", "export", "generate"
  std::set<std::string> paths;    // options that name files or folders (inputs and outputs)
  std::set<std::string> refused;  // options the studio sets itself or does not offer
};

struct JobArgs {
  std::vector<std::string> args;     // {"evaluate", "--model=...", ...}
  std::vector<std::string> devices;  // from --device (export: the CPU)
  std::map<std::string, std::string> resolved;  // path options as resolved
};

// `skip`: body keys the route reads itself. `extra` is appended before the check (--json).
JobArgs job_args(const nlohmann::json& body, const JobArgsRule& rule, const PathPolicy& paths,
                 const std::set<std::string>& skip, const std::vector<std::string>& extra);

}  // namespace loft::studio
