// Shared by the libFuzzer targets: every parser must either succeed or throw loft::Error (its
// one-line error); any other exception, a crash, a leak or undefined behaviour is a finding.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/core/error.h"

namespace loft::fuzz {

inline std::string_view text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `f`, swallowing loft::Error (an expected rejection). Messages must stay one bounded line.
template <typename F>
void expect_clean(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    const std::string_view msg = e.what();
    if (msg.size() > 4096) __builtin_trap();  // an unbounded error message is a finding
  }
}

}  // namespace loft::fuzz
