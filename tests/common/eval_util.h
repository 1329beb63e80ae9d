// Helpers shared by the benchmark tests (tests/eval, tests/app): JSONL files and error messages.
#pragma once
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
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

// lm-eval's MMLU reference for `model` (tests/data/reference/eval), each file keyed by
// "subject/index": requests, token ids and outputs.
struct MmluReference {
  std::map<std::string, nlohmann::json> req, tok, out;
};
inline std::string mmlu_key(const nlohmann::json& j) {
  return j["subject"].get<std::string>() + "/" + std::to_string(j["index"].get<int64_t>());
}
inline MmluReference read_mmlu_reference(const std::filesystem::path& ref_dir, const std::string& model) {
  MmluReference r;
  for (const auto& j : read_jsonl(ref_dir / "mmlu5_requests.jsonl")) r.req[mmlu_key(j)] = j;
  for (const auto& j : read_jsonl(ref_dir / (model + "-mmlu5_tokens.jsonl"))) r.tok[mmlu_key(j)] = j;
  for (const auto& j : read_jsonl(ref_dir / (model + "-mmlu5_outputs.jsonl"))) r.out[mmlu_key(j)] = j;
  return r;
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
