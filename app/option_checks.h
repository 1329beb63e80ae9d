// CLI11 validators for numeric options, so a bad value is a usage error (exit 2) naming the
// option as typed ("--lr: must be a finite number above 0, not -1"). CLI11's own range checks
// let NaN through and read "1e12" into integers without a bound; these do not. The same whole-
// string readers parse YAML recipe values (app/recipe.cpp), so "4abc" is never 4 anywhere.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace loft::app {

// Bounds every command that builds a training step shares (finetune, bench, info).
constexpr int64_t kMaxRows = int64_t(1) << 20;  // --batch / --micro-batch rows
constexpr int64_t kMaxRank = int64_t(1) << 16;  // --lora-rank / bench --rank

// The whole of `s` as an integer (or an exact number such as 1e3) that fits int64; nullopt for
// anything else ("4.5", "4abc", "1e30", "").
std::optional<int64_t> whole_integer(std::string_view s);
// The whole of `s` as a finite number; nullopt for anything else ("0abc", "nan", "inf", "").
std::optional<double> whole_number(std::string_view s);

// An integer in [lo, hi] (written as an integer, or as an exact number such as 1e3). It rewrites
// "1e3" as "1000", so add it with ->transform(): CLI11's ->check() drops a validator's rewrite.
CLI::Validator int_in(int64_t lo, int64_t hi = std::numeric_limits<int64_t>::max());
// A finite number above 0.
CLI::Validator positive_finite();
// A finite number of at least 0.
CLI::Validator non_negative_finite();
// A finite number in [lo, hi) (half-open, for fractions).
CLI::Validator fraction_below(double lo, double hi);
// A finite number in (lo, hi] (half-open the other way: --top-p).
CLI::Validator fraction_above(double lo, double hi);

// `check` with `name` in front of its errors (CLI11 2.1 names no option hidden from help).
CLI::Validator named_check(const std::string& name, CLI::Validator check);

// An old spelling of an option that still works but --help leaves out (a renamed option's alias
// for one release): it writes the same variable and its errors name it. `check` is added with
// ->transform(). The command's callback calls not_both(alias, option).
template <typename T>
CLI::Option* hidden_alias(CLI::App& cmd, const std::string& old_name, T& variable, CLI::Validator check) {
  return cmd.add_option(old_name, variable)->group("")->transform(named_check(old_name, std::move(check)));
}
// A usage error when both an option and its old spelling were given.
void not_both(const CLI::Option* alias, const CLI::Option* now);

// The training-step sizes, one check each wherever they are options (finetune, bench); like
// int_in, added with ->transform().
CLI::Validator seq_bound();   // 2 .. data::kMaxSeq tokens
CLI::Validator rows_bound();  // 1 .. kMaxRows rows
CLI::Validator rank_bound();  // 1 .. kMaxRank
// A seed: 0 .. 2^63-1 (a negative one would wrap into an unsigned seed).
CLI::Validator seed_bound();

}  // namespace loft::app
