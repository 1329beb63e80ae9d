// Typed access to the fields of a Hugging Face JSON config (config.json, generation_config.json)
// with errors that name the file and the field.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/core/error.h"

namespace loft::llama {

class Fields {
 public:
  Fields(const nlohmann::json& j, std::string source, std::string prefix = "")
      : j_(j), source_(std::move(source)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(cat(source_, ": field ", prefix_, key, " ", what));
  }
  bool has(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }
  const nlohmann::json& at(const std::string& key) const {
    if (!has(key)) fail(key, "is missing");
    return j_[key];
  }

  int64_t integer(const std::string& key) const {
    const nlohmann::json& v = at(key);
    if (!v.is_number_integer()) fail(key, cat("must be an integer, got ", v.dump()));
    return v.get<int64_t>();
  }
  int64_t positive(const std::string& key) const {
    const int64_t v = integer(key);
    if (v <= 0) fail(key, cat("must be positive, got ", v));
    return v;
  }
  int64_t positive(const std::string& key, int64_t fallback) const {
    return has(key) ? positive(key) : fallback;
  }
  double number(const std::string& key) const {
    const nlohmann::json& v = at(key);
    if (!v.is_number()) fail(key, cat("must be a number, got ", v.dump()));
    return v.get<double>();
  }
  double positive_number(const std::string& key) const {
    const double v = number(key);
    if (!(v > 0)) fail(key, cat("must be positive, got ", v));
    return v;
  }
  double positive_number(const std::string& key, double fallback) const {
    return has(key) ? positive_number(key) : fallback;
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) fail(key, cat("must be true or false, got ", j_[key].dump()));
    return j_[key].get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_string()) fail(key, cat("must be a string, got ", j_[key].dump()));
    return j_[key].get<std::string>();
  }
  Fields object(const std::string& key) const {
    if (!at(key).is_object()) fail(key, cat("must be an object, got ", j_[key].dump()));
    return Fields(j_[key], source_, prefix_ + key + ".");
  }
  // A token id, or a list of them (eos_token_id in Llama 3 configs).
  std::vector<int64_t> id_list(const std::string& key) const {
    if (!has(key)) return {};
    const nlohmann::json& v = j_[key];
    std::vector<int64_t> ids;
    for (const nlohmann::json& e : v.is_array() ? v : nlohmann::json::array({v})) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0)
        fail(key, cat("must be a token id or a list of them, got ", v.dump()));
      ids.push_back(e.get<int64_t>());
    }
    return ids;
  }

 private:
  const nlohmann::json& j_;
  std::string source_, prefix_;
};

}  // namespace loft::llama
