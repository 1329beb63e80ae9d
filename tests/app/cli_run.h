// Runs the real CLI in-process with stdout and stderr captured (the CLI tests share it).
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

// `args` without the program name.
inline CliResult run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "loft");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int code = app::run_cli(int(argv.size()), argv.data());
  CliResult r{code, "", ""};
  r.out = testing::internal::GetCapturedStdout();
  r.err = testing::internal::GetCapturedStderr();
  return r;
}

}  // namespace loft::test
