#include "engine/io/json_fields.h"

#include <cfloat>
#include <cmath>

#include "engine/core/error.h"
#include "engine/io/json_read.h"

namespace loft {

JsonFields::JsonFields(const nlohmann::json& j, std::string source, std::string prefix)
    : j_(j), source_(std::move(source)), prefix_(std::move(prefix)) {}

void JsonFields::fail(const std::string& key, const std::string& what) const {
  const std::string name = key.size() > 60 ? key.substr(0, 60) + "..." : key;
  throw Error(cat(source_, ": field ", prefix_, name, " ", what));
}

bool JsonFields::has(const std::string& key) const {
  if (!j_.is_object()) return false;
  const auto it = j_.find(key);
  return it != j_.end() && !it->is_null();
}

const nlohmann::json& JsonFields::at(const std::string& key) const {
  if (!has(key)) fail(key, "is missing");
  return *j_.find(key);
}

int64_t JsonFields::integer(const std::string& key, int64_t lo, int64_t hi) const {
  const nlohmann::json& v = at(key);
  auto range = [&] {
    if (lo == INT64_MIN && hi == INT64_MAX) return std::string("an integer");
    if (hi == INT64_MAX) return cat("an integer of at least ", lo);
    return cat("an integer from ", lo, " to ", hi);
  };
  if (!v.is_number_integer()) fail(key, cat("must be ", range(), ", got ", brief(v)));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    fail(key, cat("must be ", range(), ", got ", brief(v)));
  const int64_t n = v.get<int64_t>();
  if (n < lo || n > hi) {
    if (lo == 1 && n < lo) fail(key, cat("must be positive, got ", n));
    fail(key, cat("must be ", range(), ", got ", n));
  }
  return n;
}

double JsonFields::number(const std::string& key) const {
  const nlohmann::json& v = at(key);
  if (!v.is_number()) fail(key, cat("must be a number, got ", brief(v)));
  const double d = v.get<double>();
  if (!std::isfinite(d)) fail(key, cat("must be a finite number, got ", brief(v)));
  return d;
}

float JsonFields::float32(const std::string& key) const {
  const double d = number(key);
  if (std::fabs(d) > double(FLT_MAX)) fail(key, cat("is ", d, ", beyond the float range"));
  return float(d);
}

double JsonFields::positive_number(const std::string& key) const {
  const double v = number(key);
  if (!(v > 0)) fail(key, cat("must be positive, got ", v));
  return v;
}

bool JsonFields::boolean(const std::string& key) const {
  const nlohmann::json& v = at(key);
  if (!v.is_boolean()) fail(key, cat("must be true or false, got ", brief(v)));
  return v.get<bool>();
}

std::string JsonFields::string(const std::string& key) const {
  const nlohmann::json& v = at(key);
  if (!v.is_string()) fail(key, cat("must be a string, got ", brief(v)));
  return v.get<std::string>();
}

std::vector<std::string> JsonFields::strings(const std::string& key, bool allow_single) const {
  const nlohmann::json& v = at(key);
  if (allow_single && v.is_string()) return {v.get<std::string>()};
  std::vector<std::string> out;
  if (v.is_array())
    for (const nlohmann::json& e : v) {
      if (!e.is_string()) break;
      out.push_back(e.get<std::string>());
    }
  if (!v.is_array() || out.size() != v.size())
    fail(key, cat("must be a list of strings, got ", brief(v)));
  return out;
}

JsonFields JsonFields::object(const std::string& key) const {
  const nlohmann::json& v = at(key);
  if (!v.is_object()) fail(key, cat("must be an object, got ", brief(v)));
  return JsonFields(v, source_, prefix_ + key + ".");
}

std::vector<int64_t> JsonFields::id_list(const std::string& key) const {
  if (!has(key)) return {};
  const nlohmann::json& v = at(key);
  std::vector<int64_t> ids;
  const nlohmann::json list = v.is_array() ? v : nlohmann::json::array({v});
  for (const nlohmann::json& e : list) {
    const bool ok = e.is_number_unsigned() ||
                    (e.is_number_integer() && e.get<int64_t>() >= 0);
    if (!ok || (e.is_number_unsigned() && e.get<uint64_t>() > uint64_t(INT64_MAX)))
      fail(key, cat("must be a token id or a list of them, got ", brief(v)));
    ids.push_back(e.get<int64_t>());
  }
  return ids;
}

}  // namespace loft
