// What the bad-input and robustness tests check of a command: its error is one bounded line with
// the right exit code; and the small stories260K finetune command line they run.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "tests/common/cli_capture.h"

namespace loft::test {

// The error is one line, bounded, names `needle`, and is not an internal error.
void expect_one_line(const CliResult& r, int code, const std::string& needle);

// A small finetune command line (stories260K-hf, examples/demo.jsonl, 2 steps, CPU); an option
// in `extra` that the base line already has replaces its value (CLI11 refuses an option given
// twice, which would hide the check under test).
std::vector<std::string> finetune(const std::filesystem::path& out, std::vector<std::string> extra = {});

}  // namespace loft::test
