// CLI11 validators for numeric options, so a bad value is a usage error (exit 2) naming the
// option as typed ("--lr: must be a finite number above 0, not -1"). CLI11's own range checks
// let NaN through and read "1e12" into integers without a bound; these do not.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>

namespace loft::app {

// An integer in [lo, hi] (written as an integer, or as an exact number such as 1e3).
CLI::Validator int_in(int64_t lo, int64_t hi = std::numeric_limits<int64_t>::max());
// A finite number above 0.
CLI::Validator positive_finite();
// A finite number of at least 0.
CLI::Validator non_negative_finite();
// A finite number in [lo, hi) (half-open, for fractions).
CLI::Validator fraction_below(double lo, double hi);

}  // namespace loft::app
