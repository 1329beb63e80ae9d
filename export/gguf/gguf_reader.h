// A validating GGUF v3 reader: header, metadata and tensor infos, never trusting a size. Every
// count, string and array length is checked against the bytes left before anything is allocated;
// value and tensor types must be known; arrays of arrays are refused (as ggml refuses them);
// general.alignment must be a uint32 power of two; tensor names are unique, 1..63 bytes; dims
// 1..4, non-negative, rows a multiple of the type's block, sizes without overflow; tensors are
// packed in info order at aligned offsets (as ggml's loader requires) and their data lies inside
// the file. Errors are one line naming the file, the field and its byte offset (keys quoted
// through brief(): at most 80 bytes).
#pragma once
#include <filesystem>
#include <istream>
#include <string>
#include <utility>
#include <vector>

#include "export/gguf/gguf_value.h"
#include "export/gguf/gguf_writer.h"

namespace loft::gguf {

struct File {
  uint32_t version = 0;
  std::vector<std::pair<std::string, Value>> kv;  // in file order
  std::vector<TensorInfo> tensors;                // in file order
  uint32_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;  // absolute offset of the data section
  uint64_t file_size = 0;

  const Value* find(const std::string& key) const;
  const Value& at(const std::string& key) const;  // throws naming a missing key
  const TensorInfo& tensor(const std::string& name) const;  // throws naming a missing tensor
};

// Parses the `size` bytes of `in` (positioned at the file's start); `source` names it in errors.
File parse_gguf(std::istream& in, uint64_t size, const std::string& source);
File read_gguf(const std::filesystem::path& path);
// The bytes of one tensor of a file read by read_gguf().
std::vector<uint8_t> read_tensor_bytes(const std::filesystem::path& path, const File& file, const TensorInfo& t);

}  // namespace loft::gguf
