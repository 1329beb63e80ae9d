#include "export/gguf/gguf_reader.h"

#include <fstream>
#include <limits>
#include <set>

#include "engine/io/json_read.h"

namespace loft::gguf {

namespace {

// Reads little-endian fields, checking each against the bytes left.
class Cursor {
 public:
  Cursor(std::istream& in, uint64_t size, std::string source) : in_(in), size_(size), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(cat("GGUF ", source_, ": ", what, " (at byte ", pos_, ")"));
  }
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  void need(uint64_t n, const std::string& what) const {
    if (n > left()) fail(cat(what, " needs ", n, " bytes but the file has ", left(), " left"));
  }
  void bytes(void* out, uint64_t n, const std::string& what) {
    need(n, what);
    if (n > 0 && !in_.read(static_cast<char*>(out), std::streamsize(n))) fail(cat(what, ": read failed"));
    pos_ += n;
  }
  template <typename T>
  T get(const std::string& what) {
    T v;
    bytes(&v, sizeof v, what);
    return v;
  }
  std::string string(const std::string& what) {
    const uint64_t n = get<uint64_t>(cat(what, " length"));
    need(n, cat(what, " of ", n, " bytes"));
    std::string s(n, '\0');
    bytes(s.data(), n, what);
    return s;
  }

 private:
  std::istream& in_;
  uint64_t size_, pos_ = 0;
  std::string source_;
};

ValueType value_type(Cursor& c, uint32_t code, const std::string& what) {
  if (!value_type_size(code)) c.fail(cat(what, " has unknown value type ", code));
  return ValueType(code);
}

Value read_value(Cursor& c, const std::string& key) {
  const std::string what = cat("value of ", brief(key));
  Value v;
  v.type = value_type(c, c.get<uint32_t>(cat(what, " type")), what);
  if (v.type == ValueType::String) {
    v.str = c.string(what);
    return v;
  }
  if (v.type != ValueType::Array) {
    const size_t n = *value_type_size(uint32_t(v.type));
    v.raw.resize(n);
    c.bytes(v.raw.data(), n, what);
    if (v.type == ValueType::Bool && uint8_t(v.raw[0]) > 1) c.fail(cat(what, " is bool but holds ", int(uint8_t(v.raw[0]))));
    return v;
  }
  v.elem = value_type(c, c.get<uint32_t>(cat(what, " element type")), what);
  if (v.elem == ValueType::Array) c.fail(cat(what, " is an array of arrays, which GGUF readers do not support"));
  v.count = c.get<uint64_t>(cat(what, " array length"));
  if (v.elem == ValueType::String) {
    // Each string takes at least its 8-byte length.
    if (v.count > c.left() / 8) c.fail(cat(what, " claims ", v.count, " strings, more than the file can hold"));
    v.strings.reserve(v.count);
    for (uint64_t i = 0; i < v.count; ++i) v.strings.push_back(c.string(cat(what, " element ", i)));
    return v;
  }
  const size_t elem = *value_type_size(uint32_t(v.elem));
  if (v.count > c.left() / elem) c.fail(cat(what, " claims ", v.count, " elements, more than the file can hold"));
  v.raw.resize(v.count * elem);
  c.bytes(v.raw.data(), v.raw.size(), what);
  if (v.elem == ValueType::Bool)
    for (uint64_t i = 0; i < v.count; ++i)
      if (uint8_t(v.raw[i]) > 1) c.fail(cat(what, " element ", i, " is bool but holds ", int(uint8_t(v.raw[i]))));
  return v;
}

TensorInfo read_tensor_info(Cursor& c, uint64_t index, std::set<std::string>& names) {
  const std::string what = cat("tensor info ", index);
  TensorInfo t;
  t.name = c.string(cat(what, " name"));
  const std::string tn = cat("tensor '", t.name, "'");
  if (t.name.empty() || t.name.size() > kMaxNameBytes)
    c.fail(cat(what, " name has ", t.name.size(), " bytes (1 to ", kMaxNameBytes, " allowed)"));
  if (!names.insert(t.name).second) c.fail(cat(tn, " appears twice"));
  const uint32_t n_dims = c.get<uint32_t>(cat(tn, " n_dims"));
  if (n_dims < 1 || n_dims > uint32_t(kMaxDims)) c.fail(cat(tn, " has n_dims ", n_dims, " (1 to ", kMaxDims, " allowed)"));
  for (uint32_t i = 0; i < n_dims; ++i) {
    const uint64_t d = c.get<uint64_t>(cat(tn, " dim ", i));
    if (d > uint64_t(std::numeric_limits<int64_t>::max())) c.fail(cat(tn, " dim ", i, " is ", d, ", beyond int64"));
    t.ne.push_back(int64_t(d));
  }
  const uint32_t type = c.get<uint32_t>(cat(tn, " type"));
  if (!tensor_type_layout(type)) c.fail(cat(tn, " has unknown ggml type ", type));
  t.type = TensorType(type);
  try {
    t.bytes = tensor_bytes(t.type, t.ne);
  } catch (const Error& e) {
    c.fail(cat(tn, ": ", e.what()));
  }
  t.offset = c.get<uint64_t>(cat(tn, " offset"));
  return t;
}

}  // namespace

const Value* File::find(const std::string& key) const {
  for (const auto& [k, v] : kv)
    if (k == key) return &v;
  return nullptr;
}

const Value& File::at(const std::string& key) const {
  const Value* v = find(key);
  if (!v) throw Error(cat("GGUF file has no key '", key, "'"));
  return *v;
}

const TensorInfo& File::tensor(const std::string& name) const {
  for (const TensorInfo& t : tensors)
    if (t.name == name) return t;
  throw Error(cat("GGUF file has no tensor '", name, "'"));
}

File parse_gguf(std::istream& in, uint64_t size, const std::string& source) {
  Cursor c(in, size, source);
  File f;
  f.file_size = size;
  const uint32_t magic = c.get<uint32_t>("magic");
  if (magic != kMagic) c.fail(cat("not a GGUF file: magic is 0x", std::hex, magic, ", expected 0x", kMagic));
  f.version = c.get<uint32_t>("version");
  if (f.version != kVersion) c.fail(cat("GGUF version ", f.version, " is not supported (only ", kVersion, ")"));
  const uint64_t n_tensors = c.get<uint64_t>("tensor count");
  const uint64_t n_kv = c.get<uint64_t>("metadata count");
  // Smallest KV: 8-byte key length + 1 byte + 4-byte type + 1-byte value; smallest tensor info:
  // 8 + 1 name bytes, n_dims, one dim, type, offset.
  if (n_kv > c.left() / 14) c.fail(cat("metadata count ", n_kv, " is more than the file can hold"));
  if (n_tensors > c.left() / 33) c.fail(cat("tensor count ", n_tensors, " is more than the file can hold"));

  std::set<std::string> keys;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.string(cat("metadata key ", i));
    if (key.empty()) c.fail(cat("metadata key ", i, " is empty"));
    if (!keys.insert(key).second) c.fail(cat("metadata key ", brief(key), " appears twice"));
    Value v = read_value(c, key);
    f.kv.emplace_back(std::move(key), std::move(v));
  }
  if (const Value* a = f.find("general.alignment")) {
    if (a->type != ValueType::U32) c.fail(cat("general.alignment is ", a->type_name(), ", expected uint32"));
    f.alignment = a->get<uint32_t>("general.alignment");
    if (f.alignment == 0 || (f.alignment & (f.alignment - 1)) != 0)
      c.fail(cat("general.alignment ", f.alignment, " is not a power of two"));
  }

  std::set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) f.tensors.push_back(read_tensor_info(c, i, names));

  f.data_offset = align_up(c.pos(), f.alignment);
  if (f.data_offset > size) c.fail(cat("the data section would start at ", f.data_offset, ", past the end of the file"));
  uint64_t expected = 0;
  for (const TensorInfo& t : f.tensors) {
    if (t.offset != expected)
      c.fail(cat("tensor '", t.name, "' has offset ", t.offset, ", expected ", expected,
                 " (tensors are packed in info order, each padded to ", f.alignment, " bytes)"));
    if (t.offset > size - f.data_offset || t.bytes > size - f.data_offset - t.offset)
      c.fail(cat("tensor '", t.name, "' data (", t.bytes, " bytes at data offset ", t.offset, ") runs past the end of the file"));
    expected = t.offset + align_up(t.bytes, f.alignment);
  }
  return f;
}

File read_gguf(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(cat("GGUF ", path, ": cannot open"));
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(cat("GGUF ", path, ": cannot read its size (", ec.message(), ")"));
  return parse_gguf(in, size, path.string());
}

std::vector<uint8_t> read_tensor_bytes(const std::filesystem::path& path, const File& file, const TensorInfo& t) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(cat("GGUF ", path, ": cannot open"));
  std::vector<uint8_t> out(t.bytes);
  in.seekg(std::streamoff(file.data_offset + t.offset));
  if (!in.read(reinterpret_cast<char*>(out.data()), std::streamsize(out.size())))
    throw Error(cat("GGUF ", path, ": cannot read tensor '", t.name, "'"));
  return out;
}

}  // namespace loft::gguf
