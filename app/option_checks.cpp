#include "app/option_checks.h"

#include <charconv>
#include <cmath>
#include <string>

#include "datasets/data_config.h"
#include "engine/core/error.h"
#include "engine/io/json_read.h"

namespace loft::app {

std::optional<double> whole_number(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int64_t> whole_integer(std::string_view s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && end == s.data() + s.size()) return v;
  // "1e3" is an integer; 2^63 and beyond are not int64s (the double compare rounds up to 2^63).
  const std::optional<double> d = whole_number(s);
  if (!d || *d != std::floor(*d) || *d < -0x1p63 || *d >= 0x1p63) return std::nullopt;
  return int64_t(*d);
}

CLI::Validator int_in(int64_t lo, int64_t hi) {
  const std::string range =
      hi == std::numeric_limits<int64_t>::max() ? cat("an integer of at least ", lo)
                                                : cat("an integer from ", lo, " to ", hi);
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        const std::optional<int64_t> v = whole_integer(s);
        if (!v) return cat("must be ", range, ", not ", brief(s, 40));
        if (*v < lo || *v > hi) return cat("must be ", range, ", not ", *v);
        s = std::to_string(*v);
        return {};
      },
      range);
}

CLI::Validator named_check(const std::string& name, CLI::Validator check) {
  return CLI::Validator(
      [name, check](std::string& s) -> std::string {
        const std::string err = check(s);
        return err.empty() ? err : name + ": " + err;
      },
      "");
}

void not_both(const CLI::Option* alias, const CLI::Option* now) {
  if (alias->count() > 0 && now->count() > 0)
    throw UsageError(cat("--", alias->get_lnames().front(), " is the old name of ", now->get_name(), ": give one of them"));
}

CLI::Validator positive_finite() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const std::optional<double> v = whole_number(s);
        if (v && *v > 0) return {};
        return cat("must be a finite number above 0, not ", brief(s, 40));
      },
      "NUMBER > 0");
}

CLI::Validator non_negative_finite() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const std::optional<double> v = whole_number(s);
        if (v && *v >= 0) return {};
        return cat("must be a finite number of at least 0, not ", brief(s, 40));
      },
      "NUMBER >= 0");
}

CLI::Validator fraction_below(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        const std::optional<double> v = whole_number(s);
        if (v && *v >= lo && *v < hi) return {};
        return cat("must be a number in [", lo, ", ", hi, "), not ", brief(s, 40));
      },
      "FRACTION");
}

CLI::Validator fraction_above(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        const std::optional<double> v = whole_number(s);
        if (v && *v > lo && *v <= hi) return {};
        return cat("must be a number in (", lo, ", ", hi, "], not ", brief(s, 40));
      },
      "FRACTION");
}

CLI::Validator seq_bound() { return int_in(2, data::kMaxSeq); }
CLI::Validator rows_bound() { return int_in(1, kMaxRows); }
CLI::Validator rank_bound() { return int_in(1, kMaxRank); }
CLI::Validator seed_bound() { return int_in(0); }

}  // namespace loft::app
