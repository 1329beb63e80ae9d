#include "engine/core/byte_size.h"

#include <array>
#include <cctype>
#include <cstdio>
#include <limits>
#include <utility>

#include "engine/core/error.h"

namespace loft {

namespace {

using u128 = unsigned __int128;

struct Unit {
  const char* name;  // upper case
  int64_t bytes;
};

constexpr int64_t kKi = int64_t(1) << 10;
constexpr std::array<Unit, 14> kUnits{{{"", 1},
                                       {"B", 1},
                                       {"KB", 1'000},
                                       {"MB", 1'000'000},
                                       {"GB", 1'000'000'000},
                                       {"TB", 1'000'000'000'000},
                                       {"K", kKi},
                                       {"M", kKi * kKi},
                                       {"G", kKi * kKi * kKi},
                                       {"T", kKi * kKi * kKi * kKi},
                                       {"KIB", kKi},
                                       {"MIB", kKi * kKi},
                                       {"GIB", kKi * kKi * kKi},
                                       {"TIB", kKi * kKi * kKi * kKi}}};

const Unit* find_unit(std::string u) {
  for (char& c : u) c = char(std::toupper(static_cast<unsigned char>(c)));
  for (const Unit& unit : kUnits)
    if (u == unit.name) return &unit;
  return nullptr;
}

}  // namespace

int64_t parse_byte_size(const std::string& text, const std::string& option) {
  const auto bad = [&](const char* why) {
    return UsageError(cat(option, ": '", text, "' ", why, " (e.g. 24GiB, 16GB, 500MB, 1000 for bytes)"));
  };
  // The number: digits with at most one '.', as an exact integer `mantissa` / 10^decimals.
  u128 mantissa = 0;
  int digits = 0, decimals = 0;
  bool point = false;
  size_t i = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && !point) {
      point = true;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      if (++digits > 30) throw bad("is too large");  // keeps mantissa * unit inside 128 bits
      mantissa = mantissa * 10 + u128(c - '0');
      if (point) ++decimals;
    } else {
      break;
    }
  }
  if (digits == 0) throw bad("is not a size");
  size_t unit_start = i;
  while (unit_start < text.size() && text[unit_start] == ' ') ++unit_start;
  const Unit* unit = find_unit(text.substr(unit_start));
  if (!unit) throw bad("has an unknown unit");
  if (unit->bytes == 1 && decimals > 0) throw bad("is not a whole number of bytes");
  u128 bytes = mantissa * u128(unit->bytes);
  for (int d = 0; d < decimals; ++d) bytes /= 10;
  if (bytes == 0) throw bad("is not a positive size");
  if (bytes > u128(std::numeric_limits<int64_t>::max())) throw bad("is too large");
  return int64_t(bytes);
}

std::string format_byte_size(int64_t bytes) {
  // Largest unit that divides exactly; binary first, since card and allocator sizes are binary.
  static constexpr std::array<std::pair<int64_t, const char*>, 8> kNames{{{kKi * kKi * kKi * kKi, "TiB"},
                                                                          {kKi * kKi * kKi, "GiB"},
                                                                          {kKi * kKi, "MiB"},
                                                                          {1'000'000'000'000, "TB"},
                                                                          {1'000'000'000, "GB"},
                                                                          {1'000'000, "MB"},
                                                                          {kKi, "KiB"},
                                                                          {1'000, "KB"}}};
  if (bytes > 0)
    for (const auto& [size, name] : kNames)
      if (bytes % size == 0) return cat(bytes / size, ' ', name);
  return cat(bytes, " B");
}

std::string gib_text(int64_t bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(kKi * kKi * kKi));
  return buf;
}

}  // namespace loft
