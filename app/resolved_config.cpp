#include "app/resolved_config.h"

#include <CLI/CLI.hpp>
#include <yaml-cpp/yaml.h>

#include "app/recipe.h"
#include "engine/core/error.h"

namespace loft::app {

std::string resolved_config_yaml(const CLI::App& cmd, const std::map<std::string, std::string>& resolved) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::vector<std::string> unset;
  for (const CLI::Option* opt : cmd.get_options()) {
    if (opt->get_lnames().empty() || !opt->get_configurable()) continue;
    const std::string& name = opt->get_lnames().front();
    if (is_run_control(name)) continue;
    std::vector<std::string> values;
    if (opt->count() > 0) values = opt->reduced_results();
    else if (auto r = resolved.find(name); r != resolved.end()) values = {r->second};
    else if (!opt->get_default_str().empty()) values = {opt->get_default_str()};
    if (values.empty()) {
      unset.push_back(recipe_key(name));
      continue;
    }
    out << YAML::Key << recipe_key(name) << YAML::Value;
    if (opt->get_items_expected_max() > 1) {  // a list option (--data): a YAML list even of one
      out << YAML::BeginSeq;
      for (const auto& v : values) out << v;
      out << YAML::EndSeq;
    } else {
      out << values.back();
    }
  }
  out << YAML::EndMap;
  std::string text = cat("# loft ", cmd.get_name(), ": the resolved configuration of this run (loft's option names,\n",
                         "# --foo-bar as foo_bar). Repeat it: loft ", cmd.get_name(), " --config config.yaml --out NEW_RUN\n");
  text += out.c_str();
  text += "\n";
  if (!unset.empty()) {
    text += "# not set (their defaults apply):";
    for (const auto& k : unset) text += " " + k;
    text += "\n";
  }
  return text;
}

}  // namespace loft::app
