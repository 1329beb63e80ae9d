#include "export/gguf/gguf_value.h"

namespace loft::gguf {

void put_string(std::string& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.append(s);
}

std::string Value::type_name() const {
  if (type != ValueType::Array) return std::string(value_type_name(type));
  return cat("array[", value_type_name(elem), "]");
}

void Value::expect(const std::string& key, bool ok, ValueType want, bool array) const {
  if (ok) return;
  throw Error(cat("GGUF key '", key, "' is ", type_name(), ", expected ",
                  array ? cat("array[", value_type_name(want), "]") : std::string(value_type_name(want))));
}

void Value::serialize(std::string& out) const {
  put<uint32_t>(out, uint32_t(type));
  switch (type) {
    case ValueType::String: put_string(out, str); return;
    case ValueType::Array:
      put<uint32_t>(out, uint32_t(elem));
      put<uint64_t>(out, count);
      if (elem == ValueType::String) {
        for (const std::string& s : strings) put_string(out, s);
      } else {
        out += raw;
      }
      return;
    default: out += raw; return;
  }
}

}  // namespace loft::gguf
