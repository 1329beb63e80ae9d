// Shared by the tokenizer.json tests: JSON files, streaming decode, and writing a tokenizer folder.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "tests/common/test_util.h"
#include "tokenizer/tokenizer.h"

namespace loft::test {

inline nlohmann::json read_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw Error(cat("cannot open ", file));
  return nlohmann::json::parse(in);
}

inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw Error(cat("cannot open ", file));
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

// This folder's data/ (reference outputs made for these tests).
inline std::filesystem::path tokenizer_test_data(const std::string& name) {
  return source_dir() / "tests" / "tokenizer" / "data" / name;
}

// Every push() and finish() of a fresh stream decoder, joined.
inline std::string stream_all(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  const auto stream = tok.stream_decoder();
  std::string out;
  for (const int32_t id : ids) out += stream->push(id);
  return out + stream->finish();
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

}  // namespace loft::test
