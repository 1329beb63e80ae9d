#include "tests/robustness/bystanders.h"

#include <fstream>

#include "tests/common/test_util.h"

namespace loft::test {

namespace fs = std::filesystem;

void Bystanders::plant_file(const fs::path& file, const std::string& content) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << content;
  files_[file] = content;
}

void Bystanders::plant(const fs::path& dir) {
  const std::string tag = "not loft's: " + dir.string() + " ";
  for (const char* name : {"db.tmp.99", "notes.txt", ".tmp-step-3/x", ".x.loft-tmp-999999999/keep", "nested/db.tmp.99",
                           "nested/.tmp-step-4-5/y", "nested/metrics.jsonl.tmp.7", "nested/.loft.lock",
                           "nested/.q.loft-tmp-2/.loft-export"})
    plant_file(dir / name, tag + name + std::string(1, '\0') + "\xff binary tail");
}

::testing::AssertionResult Bystanders::intact() const {
  for (const auto& [file, content] : files_) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) return ::testing::AssertionFailure() << file << " is gone";
    if (read_text(file) != content) return ::testing::AssertionFailure() << file << " changed";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace loft::test
