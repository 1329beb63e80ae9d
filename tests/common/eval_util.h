// Helpers shared by the benchmark tests (tests/eval, tests/app): JSONL files and error messages.
#pragma once
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace loft::test {

// One object per non-empty line.
inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The message of the loft::Error `f` throws; "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace loft::test
