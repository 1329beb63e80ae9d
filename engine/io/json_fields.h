// Typed reads of JSON fields, the one helper for every file loft reads (config.json,
// generation_config.json, adapter_config.json, trainer_state.json, run_config.json, metrics.jsonl,
// tokenizer_config.json, safetensors metadata): wrong types, out-of-range integers (an `r` of
// 2^32+8 is not 8) and missing fields are one-line errors naming the file and the field
// ("adapter_config.json: field r must be an integer from 1 to 2147483647, got number 4294967304").
// Offending values are quoted through brief(), so messages stay short.
#pragma once
#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace loft {

class JsonFields {
 public:
  // `j` must outlive this object; `prefix` names the enclosing object ("rope_scaling.").
  JsonFields(const nlohmann::json& j, std::string source, std::string prefix = "");

  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  const std::string& source() const { return source_; }
  const nlohmann::json& json() const { return j_; }

  // Present and not null.
  bool has(const std::string& key) const;
  // The value, or an error saying it is missing.
  const nlohmann::json& at(const std::string& key) const;

  // A JSON integer within [lo, hi].
  int64_t integer(const std::string& key, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const;
  int int32(const std::string& key, int lo = INT_MIN, int hi = INT_MAX) const {
    return int(integer(key, lo, hi));
  }
  int64_t positive(const std::string& key, int64_t hi = INT64_MAX) const {
    return integer(key, 1, hi);
  }
  int64_t positive_or(const std::string& key, int64_t fallback, int64_t hi = INT64_MAX) const {
    return has(key) ? positive(key, hi) : fallback;
  }
  // Any finite JSON number.
  double number(const std::string& key) const;
  // A number that fits a float.
  float float32(const std::string& key) const;
  double positive_number(const std::string& key) const;
  double positive_number(const std::string& key, double fallback) const {
    return has(key) ? positive_number(key) : fallback;
  }
  bool boolean(const std::string& key) const;
  bool boolean(const std::string& key, bool fallback) const {
    return has(key) ? boolean(key) : fallback;
  }
  std::string string(const std::string& key) const;
  std::string string(const std::string& key, const std::string& fallback) const {
    return has(key) ? string(key) : fallback;
  }
  // A list of strings; with `allow_single`, one string stands for a list of one.
  std::vector<std::string> strings(const std::string& key, bool allow_single = false) const;
  // A nested object, whose fields are named "<prefix><key>.<field>".
  JsonFields object(const std::string& key) const;
  // A non-negative token id or a list of them; empty when absent.
  std::vector<int64_t> id_list(const std::string& key) const;

 private:
  const nlohmann::json& j_;
  std::string source_, prefix_;
};

}  // namespace loft
