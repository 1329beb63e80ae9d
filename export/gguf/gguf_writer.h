// A streaming GGUF v3 writer. Metadata and tensor infos (name, shape, type) are declared first;
// begin() computes every tensor's offset from its shape and type and writes the header; tensor
// data then goes straight to its offset, in any order, one tensor at a time, so no more than one
// tensor is ever held. finish() checks every tensor was written and moves the file into place
// atomically (temp file + rename): an interrupted export leaves no partial file.
//
// Layout (little-endian): magic "GGUF", version 3, tensor count (u64), KV count (u64); each KV as
// key string (u64 length + bytes), value type (u32), value; each tensor info as name string,
// n_dims (u32), dims (u64, GGUF order: dims[0] is the contiguous row, i.e. the row-major shape
// reversed), type (u32), offset (u64, relative to the data section); zero padding to the
// alignment; then each tensor's bytes followed by zero padding to the alignment.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "export/gguf/gguf_types.h"
#include "export/gguf/gguf_value.h"

namespace loft {
class AtomicFile;
}

namespace loft::gguf {

struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order (reversed row-major shape)
  TensorType type = TensorType::F32;
  uint64_t offset = 0;      // from the start of the data section
  uint64_t bytes = 0;       // without padding
};

// ne (GGUF order) of a row-major shape.
std::vector<int64_t> gguf_dims(std::span<const int64_t> row_major_shape);

// The header as stored before the alignment padding: magic, version, counts, every KV, every
// tensor info (with the offsets as given). The reader's fuzz target checks that what it accepts
// serializes back to the same bytes.
std::string header_bytes(const std::vector<std::pair<std::string, Value>>& kv, const std::vector<TensorInfo>& tensors);

class Writer {
 public:
  explicit Writer(std::filesystem::path path);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Adds or replaces (in place) a metadata key. Before begin() only.
  void set(const std::string& key, Value value);
  // A non-default alignment (a power of two), written as general.alignment (uint32). Before begin().
  void set_alignment(uint32_t alignment);
  // Declares a tensor; returns its index for write_tensor(). Throws on a duplicate or over-long
  // name, a shape of 0 or more than 4 dims, or rows not a multiple of the type's block.
  size_t add_tensor(const std::string& name, std::span<const int64_t> row_major_shape, TensorType type);
  // Writes the header, metadata and tensor infos. No set()/add_tensor() afterwards.
  void begin();
  // The encoded bytes of tensor `index` (exactly its size), written at its offset with padding.
  void write_tensor(size_t index, const void* bytes, size_t n);
  // Throws naming the first tensor never written; else makes the file durable and renames it
  // into place.
  void finish();

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  size_t tensor_index(const std::string& name) const;  // throws when not declared
  uint64_t data_offset() const { return data_offset_; }  // valid after begin()
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<TensorInfo> tensors_;
  std::vector<bool> written_;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::unique_ptr<AtomicFile> file_;
  bool begun_ = false, finished_ = false;
};

}  // namespace loft::gguf
