#include "tests/common/cli_expect.h"

#include <algorithm>

#include "tests/common/test_util.h"

namespace loft::test {

void expect_one_line(const CliResult& r, int code, const std::string& needle) {
  EXPECT_EQ(r.code, code) << r.err;
  EXPECT_TRUE(contains(r.err, needle)) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), r.code == 2 && contains(r.err, "--help") ? 2 : 1) << r.err;
  EXPECT_LT(r.err.size(), 1200u) << r.err.substr(0, 300);
  EXPECT_FALSE(contains(r.err, "internal error")) << r.err;
}

std::vector<std::string> finetune(const std::filesystem::path& out, std::vector<std::string> extra) {
  std::vector<std::string> a{"finetune", "--model", data_path("models/stories260K-hf").string(),
                             "--data", (source_dir() / "examples" / "demo.jsonl").string(), "--out", out.string(),
                             "--steps", "2", "--batch", "2", "--seq", "128", "--device", "cpu"};
  const auto is_option = [](const std::string& s) { return s.starts_with("--"); };
  for (size_t i = 0; i < extra.size(); ++i) {
    const auto at = is_option(extra[i]) ? std::find(a.begin(), a.end(), extra[i]) : a.end();
    if (at != a.end() && i + 1 < extra.size() && !is_option(extra[i + 1])) {
      *(at + 1) = extra[++i];
      continue;
    }
    a.push_back(extra[i]);
  }
  return a;
}

}  // namespace loft::test
