#include "studio/job_request.h"

#include "engine/core/error.h"
#include "engine/io/json_read.h"
#include "studio/command_check.h"
#include "studio/http_error.h"
#include "studio/run_request.h"

namespace loft::studio {

using nlohmann::json;

namespace {

std::string scalar_text(const json& v, const std::string& key) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return v.dump();
  throw HttpError(400, cat("'", key, "' must be a string or a number, got ", brief(v)));
}

}  // namespace

JobArgs job_args(const json& body, const JobArgsRule& rule, const PathPolicy& paths, const std::set<std::string>& skip,
                 const std::vector<std::string>& extra) {
  JobArgs out;
  out.args.push_back(rule.command);
  for (const auto& [key, value] : body.items()) {
    if (skip.count(key) || value.is_null()) continue;
    const OptionRef opt = option_for_key(rule.command, key);
    if (rule.refused.count(opt.name)) throw HttpError(400, cat("'", key, "' is not available from the studio"));
    if (opt.flag) {
      if (!value.is_boolean()) throw HttpError(400, cat("'", key, "' is true or false, got ", brief(value)));
      if (value.get<bool>()) out.args.push_back("--" + opt.name);
      continue;
    }
    const std::vector<json> values = value.is_array() ? value.get<std::vector<json>>() : std::vector<json>{value};
    for (const json& v : values) {
      std::string text = scalar_text(v, key);
      if (rule.paths.count(opt.name)) {
        text = paths.resolve(text).string();
        out.resolved[opt.name] = text;
      }
      out.args.push_back("--" + opt.name + "=" + text);
    }
  }
  out.args.insert(out.args.end(), extra.begin(), extra.end());
  const std::vector<std::string> rest(out.args.begin() + 1, out.args.end());
  const ParsedCommand parsed(rule.command, rest);
  out.devices = rule.command == "export" ? std::vector<std::string>{"cpu"}
                                         : job_devices(parsed.value_or_default("device"));
  return out;
}

}  // namespace loft::studio
