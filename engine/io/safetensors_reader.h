// Reads a .safetensors file: an 8-byte little-endian header length, a JSON header mapping tensor
// names to {dtype, shape, data_offsets}, then the raw data area. The file is mmap'd read-only and
// tensors are zero-copy CPU views whose storage keeps the mapping alive. Everything in the header
// is validated at open, so a bad file fails there with one line naming the file and the tensor.
#pragma once
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft {

struct SafetensorsEntry {
  DType dtype = DType::F32;
  Shape shape;
  size_t begin = 0;  // byte offsets into the data area (after the header)
  size_t end = 0;
};

// What the header of a safetensors file says, validated against the file's size.
struct SafetensorsHeader {
  size_t data_offset = 0;  // where the data area starts (8 + header length)
  std::map<std::string, SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
};

// Parses and validates the header of a whole file's `size` bytes (no mapping, no I/O: the fuzz
// target drives this). Throws Error naming `file` (and the tensor) on any problem.
SafetensorsHeader parse_safetensors_header(const std::string& file, const unsigned char* bytes,
                                           size_t size);

class SafetensorsReader {
 public:
  // Maps and validates the file; throws Error naming the file (and tensor) on any problem.
  static SafetensorsReader open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  // Tensor names, sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  // Throws Error naming the file when `name` is absent.
  const SafetensorsEntry& info(const std::string& name) const;
  // Zero-copy CPU view of the tensor's bytes (copied only when the bytes are not aligned to the
  // dtype size, which a conforming writer never produces). Read-only memory: do not write to it.
  Tensor tensor(const std::string& name) const;
  // Drops the resident pages of `name`'s bytes from this process (madvise DONTNEED on the whole
  // pages inside its range): a streaming reader calls it once done with a tensor, so mapped
  // pages do not pile up in its resident set. Views stay valid (pages are read again on access).
  void release(const std::string& name) const;
  // The optional "__metadata__" string map.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Sum of numel over every tensor in the file.
  int64_t parameter_count() const;

 private:
  std::filesystem::path path_;
  std::shared_ptr<const void> mapping_;  // owns the mmap; tensors share it
  const unsigned char* data_ = nullptr;  // start of the data area
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace loft
