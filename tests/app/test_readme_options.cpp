// README.md names every command-line option: each long option of every command (walked from the
// CLI itself, so a new option cannot be missed) appears in README as written, `--name`. A
// command's options are documented where the command is, so an option only another command's
// line mentions would pass; what this catches is an option README never names at all.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <sstream>

#include "app/commands.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

std::string readme() {
  std::ifstream f(test::source_dir() / "README.md");
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// "--name" appears, not as the start of a longer option ("--seq" inside "--sequence").
bool names(const std::string& text, const std::string& option) {
  for (size_t at = text.find(option); at != std::string::npos; at = text.find(option, at + 1)) {
    const size_t end = at + option.size();
    if (end == text.size() || !(std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '-'))
      return true;
  }
  return false;
}

void collect(const CLI::App& app, const std::string& path, std::vector<std::pair<std::string, std::string>>& out) {
  for (const CLI::Option* o : app.get_options())
    for (const std::string& name : o->get_lnames())
      if (name != "help") out.emplace_back(path, "--" + name);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    collect(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), out);
}

TEST(ReadmeOptions, EveryOptionOfEveryCommandIsNamed) {
  CLI::App root;
  app::build_cli(root);
  std::vector<std::pair<std::string, std::string>> options;
  collect(root, "", options);
  ASSERT_GT(options.size(), 100u) << "the walk found the commands' options";
  const std::string text = readme();
  for (const auto& [command, option] : options)
    EXPECT_TRUE(names(text, option)) << "README.md never names " << option << " (loft " << command << ")";
}

}  // namespace
}  // namespace loft
