// Shared by the robustness tests (issue 31): runs the real binary on bad input and checks the
// one guarantee every case has: exit 2 (usage) or 1 (runtime), one line naming what is wrong,
// no internal text (a failed check, a library's exception, a crash or a hang).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/common/binary_run.h"
#include "tests/common/test_util.h"

namespace loft::test {

inline std::string stories() { return (source_dir() / "examples" / "stories260K").string(); }
inline std::string demo_data() { return (source_dir() / "examples" / "demo.jsonl").string(); }

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// Text that must never reach a user: an assert, a library's own exception or message.
inline constexpr const char* kInternal[] = {"check failed", "json.exception", "yaml-cpp", "bad conversion",
                                            "filesystem error", "terminate called", "internal error",
                                            "std::", "what():"};

// `args` fails cleanly: exit `code`, one error line ("loft: error: ...", which CLI11's usage
// errors follow with a pointer to --help) holding each of `needles`, nothing internal anywhere.
// Progress and notes before it are allowed.
inline void expect_failure(const std::vector<std::string>& args, int code, const std::vector<std::string>& needles) {
  std::string cmd;
  for (const auto& a : args) cmd += " " + a;
  SCOPED_TRACE("loft" + cmd.substr(0, 300));
  const BinaryResult r = run_loft(args);
  ASSERT_FALSE(r.timed_out) << "hung";
  ASSERT_EQ(r.signal, 0) << "killed by signal " << r.signal << "\n" << r.err;
  EXPECT_EQ(r.code, code) << r.err;
  std::vector<std::string> errors;
  for (size_t b = 0; b < r.err.size();) {
    const size_t e = std::min(r.err.find('\n', b), r.err.size());
    if (r.err.compare(b, 13, "loft: error: ") == 0) errors.push_back(r.err.substr(b, e - b));
    b = e + 1;
  }
  ASSERT_EQ(errors.size(), 1u) << r.err;
  EXPECT_LT(errors[0].size(), 1200u) << errors[0].substr(0, 300);
  for (const auto& n : needles) EXPECT_TRUE(contains(errors[0], n));
  for (const char* bad : kInternal) EXPECT_FALSE(contains(r.err, bad));
}

}  // namespace loft::test
