#include "app/option_checks.h"

#include <charconv>
#include <cmath>
#include <string>

#include "engine/core/error.h"
#include "engine/io/json_read.h"

namespace loft::app {

namespace {

// The whole of `s` as a double, or NaN when it is not one number ("nan" also gives NaN).
double to_double(const std::string& s) {
  double v = std::nan("");
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nan("");
  return v;
}

}  // namespace

CLI::Validator int_in(int64_t lo, int64_t hi) {
  const std::string range =
      hi == std::numeric_limits<int64_t>::max() ? cat("an integer of at least ", lo)
                                                : cat("an integer from ", lo, " to ", hi);
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size()) {
          const double d = to_double(s);  // "1e3" is an integer; "1e12" is out of range below
          if (!std::isfinite(d) || d != std::floor(d) || d < double(lo) || d > double(hi))
            return cat("must be ", range, ", not ", brief(s, 40));
          v = int64_t(d);
          s = std::to_string(v);
        }
        if (v < lo || v > hi) return cat("must be ", range, ", not ", v);
        return {};
      },
      range);
}

CLI::Validator positive_finite() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const double v = to_double(s);
        if (std::isfinite(v) && v > 0) return {};
        return cat("must be a finite number above 0, not ", brief(s, 40));
      },
      "NUMBER > 0");
}

CLI::Validator non_negative_finite() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const double v = to_double(s);
        if (std::isfinite(v) && v >= 0) return {};
        return cat("must be a finite number of at least 0, not ", brief(s, 40));
      },
      "NUMBER >= 0");
}

CLI::Validator fraction_below(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        const double v = to_double(s);
        if (std::isfinite(v) && v >= lo && v < hi) return {};
        return cat("must be a number in [", lo, ", ", hi, "), not ", brief(s, 40));
      },
      "FRACTION");
}

}  // namespace loft::app
