// Typed reads of JSON config fields with one-line errors naming the file and the field
// ("adapter_config.json: field 'loft.halo.level' must be an integer").
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/core/error.h"

namespace loft {

// obj[key] as T (int, float, double, std::string or std::vector<std::string>). `where` prefixes
// the key in messages ("loft." for a nested object). Integers must be JSON integers.
template <typename T>
T json_field(const nlohmann::json& obj, const std::string& key, const std::filesystem::path& file,
             const std::string& where = "") {
  const std::string name = where + key;
  if (!obj.is_object() || !obj.contains(key))
    throw Error(cat(file.string(), ": field '", name, "' is missing"));
  const nlohmann::json& v = obj.at(key);
  auto bad = [&](const char* what) {
    return Error(cat(file.string(), ": field '", name, "' must be ", what, ", got ", v.dump()));
  };
  if constexpr (std::is_same_v<T, int> || std::is_same_v<T, int64_t>) {
    if (!v.is_number_integer()) throw bad("an integer");
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) throw bad("a number");
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) throw bad("a string");
  } else {
    static_assert(std::is_same_v<T, std::vector<std::string>>);
    if (!v.is_array()) throw bad("a list of strings");
    for (const auto& e : v)
      if (!e.is_string()) throw bad("a list of strings");
  }
  return v.get<T>();
}

}  // namespace loft
