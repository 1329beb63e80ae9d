// Runs the loft CLI in-process (app::run_cli) with stdout and stderr captured, for command tests.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/commands.h"

namespace loft::test {

struct CliResult {
  int code;
  std::string out, err;
};

// `args` without the program name: {"data", "inspect", "x.jsonl"}.
inline CliResult run_cli_captured(std::vector<std::string> args) {
  args.insert(args.begin(), "loft");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int code = app::run_cli(int(argv.size()), argv.data());
  CliResult r{code, testing::internal::GetCapturedStdout(), testing::internal::GetCapturedStderr()};
  return r;
}

}  // namespace loft::test
