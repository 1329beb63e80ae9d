// A model's weights as Hugging Face saves them in a folder: one `<stem>.safetensors`, or
// `<stem>.safetensors.index.json` whose weight_map names the shard holding each tensor. All files
// are opened (and validated) up front; tensors are then looked up by name across them.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/io/safetensors_reader.h"

namespace loft {

class SafetensorsCheckpoint {
 public:
  // Prefers `<stem>.safetensors` (as transformers does), else the index. Throws Error naming the
  // folder when neither exists, the index and shard when a shard is absent, and the tensor when
  // the index and the shards disagree or one tensor is stored twice.
  static SafetensorsCheckpoint open(const std::filesystem::path& dir,
                                    const std::string& stem = "model");

  const std::filesystem::path& dir() const { return dir_; }
  const std::vector<SafetensorsReader>& files() const { return files_; }
  // Tensor names over all files, sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  // The file holding `name`; throws Error naming the folder when no file has it.
  const SafetensorsReader& file_of(const std::string& name) const;
  const SafetensorsEntry& info(const std::string& name) const { return file_of(name).info(name); }
  Tensor tensor(const std::string& name) const { return file_of(name).tensor(name); }
  void release(const std::string& name) const { file_of(name).release(name); }
  // Exact sum of numel over every tensor in every file.
  int64_t parameter_count() const;
  // The distinct dtypes stored, in DType order.
  std::vector<DType> dtypes() const;

 private:
  void add_file(SafetensorsReader file);

  std::filesystem::path dir_;
  std::vector<SafetensorsReader> files_;
  std::map<std::string, size_t> where_;  // tensor name -> index into files_
};

}  // namespace loft
