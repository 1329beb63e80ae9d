// Files that are not loft's, planted in and around an output path before a command runs and
// checked byte for byte afterwards: whatever the command did, it must not have touched them. Their
// names imitate loft's temporaries (db.tmp.99, .tmp-step-3, metrics.jsonl.tmp.7 one level down,
// an export-like .x.loft-tmp-<dead pid> without a marker), the way a person's files could.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

namespace loft::test {

class Bystanders {
 public:
  // Plants the set in `dir` (created when missing): files at its top and one folder down.
  void plant(const std::filesystem::path& dir);
  // One file with `content` (its folder created).
  void plant_file(const std::filesystem::path& file, const std::string& content);
  // Every planted file is there with its bytes.
  ::testing::AssertionResult intact() const;
  size_t size() const { return files_.size(); }

 private:
  std::map<std::filesystem::path, std::string> files_;
};

}  // namespace loft::test
