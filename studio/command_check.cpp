#include "studio/command_check.h"

#include <CLI/CLI.hpp>

#include "app/commands.h"
#include "app/recipe.h"
#include "engine/core/error.h"
#include "engine/core/failure.h"
#include "engine/io/json_read.h"
#include "studio/http_error.h"

namespace loft::studio {

using nlohmann::json;

namespace {

// The root app with every command, which stops a parse after every option is read and checked
// and before any command's callback runs (App::run_callback calls pre_callback first). The
// commands' callbacks stay in place: they own the variables their options write to.
struct ParseDone {};
class ParseOnlyApp : public CLI::App {
  void pre_callback() override { throw ParseDone{}; }
};

std::unique_ptr<CLI::App> parse_only(const std::string& command, CLI::App*& sub) {
  std::unique_ptr<CLI::App> root = std::make_unique<ParseOnlyApp>();
  app::build_cli(*root);
  sub = root->get_subcommand(command);
  return root;
}

// "FILE:LINE: message" from the recipe reader -> "message": the request has no lines.
std::string without_location(const std::string& message, const std::string& file) {
  if (!message.starts_with(file + ":")) return message;
  const size_t space = message.find(": ", file.size() + 1);
  return space == std::string::npos ? message : message.substr(space + 2);
}

}  // namespace

ParsedCommand::ParsedCommand(const std::string& command, const std::vector<std::string>& args) {
  root_ = parse_only(command, command_);
  std::vector<const char*> argv{"loft", command.c_str()};
  std::string recipe;
  for (size_t i = 0; i < args.size(); ++i) {
    argv.push_back(args[i].c_str());
    if (args[i] == "--config" && i + 1 < args.size() && app::is_yaml_config(args[i + 1])) recipe = args[i + 1];
  }
  if (!recipe.empty()) root_->config_formatter(std::make_shared<app::YamlRecipe>(recipe, command_));
  try {
    root_->parse(int(argv.size()), argv.data());
  } catch (const ParseDone&) {  // parsed and checked
  } catch (const CLI::ParseError& e) {
    throw HttpError(400, without_location(e.what(), recipe));
  } catch (const HttpError&) {
    throw;
  } catch (...) {
    throw HttpError(400, without_location(report_current_exception().message, recipe));
  }
}

ParsedCommand::~ParsedCommand() = default;

std::vector<std::string> ParsedCommand::values(const std::string& name) const {
  const CLI::Option* o = command_->get_option_no_throw("--" + name);
  if (!o || o->count() == 0) return {};
  return o->results();
}

std::string ParsedCommand::value_or_default(const std::string& name) const {
  const std::vector<std::string> v = values(name);
  if (!v.empty()) return v.front();
  const CLI::Option* o = command_->get_option_no_throw("--" + name);
  return o ? o->get_default_str() : std::string();
}

json command_options(const std::string& command) {
  CLI::App* sub = nullptr;
  const auto root = parse_only(command, sub);
  json out = json::array();
  for (const CLI::Option* o : sub->get_options()) {
    if (o->get_lnames().empty()) continue;  // positional arguments
    const std::string name = o->get_lnames().front();
    if (app::is_run_control(name) || !o->get_configurable()) continue;
    // CLI11's type name is "INT:<the check's description>"; IsMember describes itself as {a,b}.
    const std::string full = o->get_type_name();
    const std::string base = full.substr(0, full.find(':'));
    std::string type = o->get_expected_max() == 0 ? "bool"
                       : o->get_expected_max() > 1 ? "list"
                       : base == "INT" || base == "UINT" ? "int"
                       : base == "FLOAT" ? "float"
                                          : "text";
    json choices = nullptr;
    if (const size_t open = full.find('{'), close = full.rfind('}');
        open != std::string::npos && close != std::string::npos && close > open) {
      choices = json::array();
      std::string list = full.substr(open + 1, close - open - 1);
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        if (comma > at) choices.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    }
    out.push_back({{"name", name},
                   {"recipe_key", app::recipe_key(name)},
                   {"group", o->get_group()},
                   {"default", o->get_default_str()},
                   {"help", o->get_description()},
                   {"type", type},
                   {"choices", choices}});
  }
  return out;
}

OptionRef option_for_key(const std::string& command, const std::string& key) {
  CLI::App* sub = nullptr;
  const auto root = parse_only(command, sub);
  std::string name = key;
  std::replace(name.begin(), name.end(), '_', '-');
  const CLI::Option* o = sub->get_option_no_throw("--" + name);
  if (!o || app::is_run_control(name) || name.empty())
    throw HttpError(400, cat("unknown key ", brief(key), " for loft ", command));
  return {name, o->get_expected_max() == 0};
}

}  // namespace loft::studio
