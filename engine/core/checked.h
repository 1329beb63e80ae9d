// Checked arithmetic for numbers a user gave (options, recipe keys, file fields) and the sizes
// built from them: a product or sum that does not fit its type is a UsageError naming what was
// computed ("micro_batch_size x gradient_accumulation_steps overflows 64 bits (...)"), never a
// wrapped value that later crashes or passes a bound check by accident.
#pragma once
#include <concepts>
#include <string_view>

#include "engine/core/error.h"

namespace loft {

namespace detail {
template <std::integral T>
[[noreturn]] void overflow(std::string_view what, T a, const char* op, T b) {
  throw UsageError(cat(what, " overflows ", 8 * sizeof(T), " bits (", a, op, b, ")"));
}
}  // namespace detail

// a x b; `what` names the product in the error ("--batch x --seq").
template <std::integral T>
T checked_mul(T a, T b, std::string_view what) {
  T out;
  if (__builtin_mul_overflow(a, b, &out)) detail::overflow(what, a, " x ", b);
  return out;
}

// a + b; `what` names the sum in the error.
template <std::integral T>
T checked_add(T a, T b, std::string_view what) {
  T out;
  if (__builtin_add_overflow(a, b, &out)) detail::overflow(what, a, " + ", b);
  return out;
}

}  // namespace loft
