#include "export/gguf/gguf_writer.h"

#include <algorithm>

#include "engine/io/atomic_file.h"

namespace loft::gguf {

std::vector<int64_t> gguf_dims(std::span<const int64_t> row_major_shape) {
  return std::vector<int64_t>(row_major_shape.rbegin(), row_major_shape.rend());
}

std::string header_bytes(const std::vector<std::pair<std::string, Value>>& kv, const std::vector<TensorInfo>& tensors) {
  std::string head;
  put<uint32_t>(head, kMagic);
  put<uint32_t>(head, kVersion);
  put<uint64_t>(head, tensors.size());
  put<uint64_t>(head, kv.size());
  for (const auto& [key, value] : kv) {
    put_string(head, key);
    value.serialize(head);
  }
  for (const TensorInfo& t : tensors) {
    put_string(head, t.name);
    put<uint32_t>(head, uint32_t(t.ne.size()));
    for (const int64_t d : t.ne) put<uint64_t>(head, uint64_t(d));
    put<uint32_t>(head, uint32_t(t.type));
    put<uint64_t>(head, t.offset);
  }
  return head;
}

Writer::Writer(std::filesystem::path path) : path_(std::move(path)) {}
Writer::~Writer() = default;

void Writer::set(const std::string& key, Value value) {
  LOFT_CHECK(!begun_, "GGUF ", path_, ": metadata '", key, "' set after the header was written");
  if (key.empty()) throw Error(cat("GGUF ", path_, ": a metadata key is empty"));
  for (auto& [k, v] : kv_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  kv_.emplace_back(key, std::move(value));
}

void Writer::set_alignment(uint32_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw Error(cat("GGUF ", path_, ": alignment ", alignment, " is not a power of two"));
  alignment_ = alignment;
  set("general.alignment", Value::of<uint32_t>(alignment));
}

size_t Writer::add_tensor(const std::string& name, std::span<const int64_t> row_major_shape, TensorType type) {
  LOFT_CHECK(!begun_, "GGUF ", path_, ": tensor '", name, "' declared after the header was written");
  const auto fail = [&](const std::string& msg) { throw Error(cat("GGUF ", path_, ": tensor '", name, "' ", msg)); };
  if (name.empty() || name.size() > kMaxNameBytes) fail(cat("has a name of ", name.size(), " bytes (1 to ", kMaxNameBytes, " allowed)"));
  if (row_major_shape.empty() || row_major_shape.size() > size_t(kMaxDims))
    fail(cat("has ", row_major_shape.size(), " dimensions (1 to ", kMaxDims, " allowed)"));
  for (const int64_t d : row_major_shape)
    if (d <= 0) fail(cat("has a dimension of ", d));
  for (const TensorInfo& t : tensors_)
    if (t.name == name) fail("is declared twice");
  TensorInfo info{name, gguf_dims(row_major_shape), type, 0, 0};
  try {
    info.bytes = tensor_bytes(type, info.ne);
  } catch (const Error& e) {
    fail(e.what());
  }
  tensors_.push_back(std::move(info));
  return tensors_.size() - 1;
}

size_t Writer::tensor_index(const std::string& name) const {
  for (size_t i = 0; i < tensors_.size(); ++i)
    if (tensors_[i].name == name) return i;
  throw Error(cat("GGUF ", path_, ": no tensor '", name, "' was declared"));
}

void Writer::begin() {
  LOFT_CHECK(!begun_, "GGUF ", path_, ": begin() called twice");
  uint64_t offset = 0;
  for (TensorInfo& t : tensors_) {
    t.offset = offset;
    offset += align_up(t.bytes, alignment_);
  }
  std::string head = header_bytes(kv_, tensors_);
  data_offset_ = align_up(head.size(), alignment_);
  head.resize(data_offset_, '\0');
  file_ = std::make_unique<AtomicFile>(path_);
  file_->write(head.data(), head.size());
  written_.assign(tensors_.size(), false);
  begun_ = true;
}

void Writer::write_tensor(size_t index, const void* bytes, size_t n) {
  LOFT_CHECK(begun_ && !finished_, "GGUF ", path_, ": tensor data written outside begin()..finish()");
  LOFT_CHECK(index < tensors_.size(), "GGUF ", path_, ": tensor index ", index, " out of range");
  const TensorInfo& t = tensors_[index];
  if (written_[index]) throw Error(cat("GGUF ", path_, ": tensor '", t.name, "' written twice"));
  if (n != t.bytes)
    throw Error(cat("GGUF ", path_, ": tensor '", t.name, "' has ", n, " bytes of data, expected ", t.bytes));
  file_->write_at(data_offset_ + t.offset, bytes, n);
  const uint64_t pad = align_up(t.bytes, alignment_) - t.bytes;
  if (pad > 0) {
    const std::string zeros(pad, '\0');
    file_->write_at(data_offset_ + t.offset + t.bytes, zeros.data(), zeros.size());
  }
  written_[index] = true;
}

void Writer::finish() {
  LOFT_CHECK(begun_ && !finished_, "GGUF ", path_, ": finish() without begin() or twice");
  const auto missing = std::find(written_.begin(), written_.end(), false);
  if (missing != written_.end())
    throw Error(cat("GGUF ", path_, ": tensor '", tensors_[size_t(missing - written_.begin())].name,
                    "' was never written"));
  file_->commit();
  finished_ = true;
}

}  // namespace loft::gguf
