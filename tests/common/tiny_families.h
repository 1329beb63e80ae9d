// The tiny random Llama-family cousins in tests/data/models (tests/data/README.md: Qwen2 tied and
// untied, Qwen3, Mistral with a 16-key window), for INSTANTIATE_TEST_SUITE_P(Families, Suite,
// test::tiny_families(), test::family_test_name): the suite's parameter is the model's folder name.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace loft::test {

inline auto tiny_families() {
  return ::testing::ValuesIn(std::vector<std::string>{"qwen2-tiny-tied", "qwen2-tiny", "qwen3-tiny", "mistral-tiny"});
}
// "qwen2-tiny" -> "qwen2_tiny" (a gtest instance name has no '-').
inline std::string family_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

}  // namespace loft::test
