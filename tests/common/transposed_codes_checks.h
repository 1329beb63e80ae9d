// The checks --falqon-transposed and --halo-transposed share (engine/peft/transposed_codes.h): how
// their spec resolves the choice for a run, and how the flag reads its values.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/peft/method_spec.h"

namespace loft::test {

// Options field `field` of T under `method` (default options otherwise): auto asks the plan about
// the run with the kept copies and keeps them only where it fits; keep or per-step, given, stay
// without the plan being asked.
template <class T>
void expect_auto_keeps_only_where_it_fits(const std::string& method, TransposedCodes T::*field) {
  const MethodSpec& spec = method_spec(method);
  for (bool room : {true, false}) {
    MethodOptions m;
    m.method = method;
    bool asked_keep = false;
    spec.resolve_memory_choices(m, [&](const MethodOptions& with) {
      asked_keep = with.get<T>().*field == TransposedCodes::keep;
      return room;
    });
    EXPECT_TRUE(asked_keep) << "the plan is asked about the run with the kept copies";
    EXPECT_EQ(m.get<T>().*field, room ? TransposedCodes::keep : TransposedCodes::per_step);
  }
  for (TransposedCodes given : {TransposedCodes::keep, TransposedCodes::per_step}) {
    MethodOptions m;
    m.method = method;
    m.get<T>().*field = given;
    spec.resolve_memory_choices(m, [](const MethodOptions&) -> bool {
      ADD_FAILURE() << "a choice given on the command line is not revisited";
      return true;
    });
    EXPECT_EQ(m.get<T>().*field, given);
  }
}

// `method`'s flag named `name`; a test failure (and nullptr) when it has none.
inline const MethodFlag* method_flag_named(const std::vector<MethodFlag>& flags, const std::string& name) {
  for (const MethodFlag& f : flags)
    if (f.name == name) return &f;
  ADD_FAILURE() << "no flag " << name;
  return nullptr;
}

}  // namespace loft::test
