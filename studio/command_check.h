// Options of loft's own commands, read from their CLI11 definitions (app/cli.cpp's build_cli), so
// the studio checks a request exactly as the command line would and never keeps a second list:
// the option table the page shows, request keys mapped to options, and a parse of the argument
// vector (or YAML recipe) a job will run, made before the job is queued.
#pragma once
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/cli_fwd.h"

namespace loft::studio {

// A command parsed but not run: its options hold the parsed values.
class ParsedCommand {
 public:
  // Parses `loft COMMAND ARGS...`; HttpError 400 with CLI11's or the recipe reader's one line
  // (a YAML recipe file given as --config is read as finetune reads it).
  ParsedCommand(const std::string& command, const std::vector<std::string>& args);
  ~ParsedCommand();
  // The values given for option --NAME (empty when not given).
  std::vector<std::string> values(const std::string& name) const;
  // The option's value as given, else its default.
  std::string value_or_default(const std::string& name) const;

 private:
  std::unique_ptr<CLI::App> root_;
  CLI::App* command_ = nullptr;
};

// Every option of `loft COMMAND`: [{"name", "recipe_key", "group", "default", "help", "type",
// "choices"}] in definition order, without help, config and run-control options (resume, overwrite).
nlohmann::json command_options(const std::string& command);

struct OptionRef {
  std::string name;  // long name without dashes
  bool flag = false;  // takes no value
};
// The option a request key names for `loft COMMAND` (`max_new_tokens` -> --max-new-tokens);
// HttpError 400 naming the key when the command has no such option.
OptionRef option_for_key(const std::string& command, const std::string& key);

}  // namespace loft::studio
