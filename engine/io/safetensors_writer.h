// Writes named tensors (any device; copied to the host) and a string metadata map as a
// .safetensors file. Output is deterministic: tensors are laid out in name order and the header
// JSON has sorted keys, padded with spaces so the data area starts on an 8-byte boundary. The
// write is atomic: a `<path>.loft-tmp.<pid>` file in the same folder is written, fsync'd and renamed.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft {

class AtomicFile;

void write_safetensors(const std::filesystem::path& path,
                       const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// One tensor a streamed file will hold: declared before any data is written, because the header
// (names, dtypes, shapes, offsets) comes first in the file.
struct SafetensorsSlot {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  size_t nbytes() const { return size_t(shape_numel(shape)) * dtype_size(dtype); }
};

// A .safetensors file written tensor by tensor, so a writer never holds more than one tensor:
// the header is written at construction from `slots`, then add() must be called once per slot,
// in the slots' order, with a host tensor of exactly that dtype and shape; commit() (after the
// last) makes the file appear atomically, as write_safetensors does. The data area follows the
// slots' order (not name order); offsets in the header say where each tensor is, so readers do
// not care. Throws Error naming the file and tensor on an out-of-order or mis-shaped add().
class SafetensorsStreamWriter {
 public:
  SafetensorsStreamWriter(const std::filesystem::path& path, std::vector<SafetensorsSlot> slots,
                          const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsStreamWriter();
  void add(const std::string& name, const Tensor& host);
  void commit();
  // Bytes of tensor data the file holds (header excluded).
  static size_t data_bytes(const std::vector<SafetensorsSlot>& slots);

 private:
  std::filesystem::path path_;
  std::vector<SafetensorsSlot> slots_;
  size_t next_ = 0;
  std::unique_ptr<AtomicFile> out_;
};

}  // namespace loft
