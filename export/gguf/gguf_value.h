// One GGUF metadata value: a scalar of any GGUF type, a string, or an array of scalars or strings
// (arrays of arrays are not written, and the reader refuses them as ggml does). Numbers are held
// as their little-endian bytes, so a value round-trips bit for bit.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/core/error.h"
#include "export/gguf/gguf_types.h"

namespace loft::gguf {

static_assert(std::endian::native == std::endian::little, "GGUF files are written little-endian");

template <typename T> constexpr ValueType value_type_of();
template <> constexpr ValueType value_type_of<uint8_t>() { return ValueType::U8; }
template <> constexpr ValueType value_type_of<int8_t>() { return ValueType::I8; }
template <> constexpr ValueType value_type_of<uint16_t>() { return ValueType::U16; }
template <> constexpr ValueType value_type_of<int16_t>() { return ValueType::I16; }
template <> constexpr ValueType value_type_of<uint32_t>() { return ValueType::U32; }
template <> constexpr ValueType value_type_of<int32_t>() { return ValueType::I32; }
template <> constexpr ValueType value_type_of<float>() { return ValueType::F32; }
template <> constexpr ValueType value_type_of<bool>() { return ValueType::Bool; }
template <> constexpr ValueType value_type_of<uint64_t>() { return ValueType::U64; }
template <> constexpr ValueType value_type_of<int64_t>() { return ValueType::I64; }
template <> constexpr ValueType value_type_of<double>() { return ValueType::F64; }

struct Value {
  ValueType type = ValueType::U8;
  ValueType elem = ValueType::U8;     // arrays: the element type
  uint64_t count = 0;                 // arrays: the number of elements
  std::string raw;                    // scalars and numeric arrays: little-endian element bytes
  std::string str;                    // String
  std::vector<std::string> strings;   // arrays of strings

  template <typename T>
  static Value of(T v) {
    Value r;
    r.type = value_type_of<T>();
    r.raw = encode(v);
    return r;
  }
  static Value string(std::string s) {
    Value r;
    r.type = ValueType::String;
    r.str = std::move(s);
    return r;
  }
  template <typename T>
  static Value array(std::span<const T> items) {
    Value r;
    r.type = ValueType::Array;
    r.elem = value_type_of<T>();
    r.count = items.size();
    for (const T& v : items) r.raw += encode(v);
    return r;
  }
  template <typename T>
  static Value array(const std::vector<T>& items) { return array(std::span<const T>(items)); }
  static Value string_array(std::vector<std::string> items) {
    Value r;
    r.type = ValueType::Array;
    r.elem = ValueType::String;
    r.count = items.size();
    r.strings = std::move(items);
    return r;
  }

  // Typed reads; each throws loft::Error naming `key` when the value has another type.
  template <typename T>
  T get(const std::string& key) const {
    expect(key, type == value_type_of<T>(), value_type_of<T>());
    return decode<T>(raw.data());
  }
  const std::string& get_string(const std::string& key) const {
    expect(key, type == ValueType::String, ValueType::String);
    return str;
  }
  template <typename T>
  std::vector<T> get_array(const std::string& key) const {
    expect(key, type == ValueType::Array && elem == value_type_of<T>(), value_type_of<T>(), true);
    std::vector<T> out(count);
    for (uint64_t i = 0; i < count; ++i) out[i] = decode<T>(raw.data() + i * sizeof(T));
    return out;
  }
  const std::vector<std::string>& get_strings(const std::string& key) const {
    expect(key, type == ValueType::Array && elem == ValueType::String, ValueType::String, true);
    return strings;
  }
  // "uint32", "array[string]", ...
  std::string type_name() const;

  // Appends the value as stored after a key: type code, then the payload.
  void serialize(std::string& out) const;

 private:
  template <typename T>
  static std::string encode(T v) {
    if constexpr (std::is_same_v<T, bool>) return std::string(1, v ? '\1' : '\0');
    std::string b(sizeof(T), '\0');
    std::memcpy(b.data(), &v, sizeof(T));
    return b;
  }
  template <typename T>
  static T decode(const char* p) {
    if constexpr (std::is_same_v<T, bool>) return *p != 0;
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }
  void expect(const std::string& key, bool ok, ValueType want, bool array = false) const;
};

// Appends a GGUF string: uint64 length, then the bytes.
void put_string(std::string& out, std::string_view s);
template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

}  // namespace loft::gguf
