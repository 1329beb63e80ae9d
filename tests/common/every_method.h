// The methods a test runs, taken from the registry (engine/peft/method_spec.h) rather than
// written out: a method added to the registry is in every such test without an edit.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/peft/method_spec.h"

namespace loft::test {

// Every registered method, for INSTANTIATE_TEST_SUITE_P(Methods, Suite, test::every_method(),
// test::method_test_name): the suite's parameter is the method's name (std::string).
inline auto every_method() { return ::testing::ValuesIn(method_names()); }
// The method's name as the instance's name (Suite.Test/hot instead of Suite.Test/4).
inline std::string method_test_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

// One method per way a step updates a model, for the tests too slow to run every method: the
// default (its adapter is its PEFT pair, as the LoRA family's) and each method whose trained
// state is its own, rebuilt from method state (FALQON's row merge).
inline std::vector<std::string> one_method_per_update_kind() {
  std::vector<std::string> out{default_method()};
  for (const MethodSpec* s : method_specs())
    if (!s->pair_adapter()) out.push_back(s->name());
  return out;
}

// Every method and each variant its spec gives as an example ("hot:lqs"), as bench's --method
// items (app/method_flags.h's apply_method_variants reads them).
inline std::vector<std::string> every_method_and_variant_example() {
  std::vector<std::string> out;
  for (const MethodSpec* s : method_specs()) {
    out.push_back(s->name());
    for (const std::string& v : s->variant_examples()) out.push_back(v);
  }
  return out;
}

// The methods that do not take the option `flag` (e.g. "--backbone").
inline std::vector<std::string> methods_without_flag(const std::string& flag) {
  std::vector<std::string> out;
  for (const MethodSpec* s : method_specs())
    if (!s->takes_flag(flag)) out.push_back(s->name());
  return out;
}

}  // namespace loft::test
