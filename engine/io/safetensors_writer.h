// Writes named tensors (any device; copied to the host) and a string metadata map as a
// .safetensors file. Output is deterministic: tensors are laid out in name order and the header
// JSON has sorted keys, padded with spaces so the data area starts on an 8-byte boundary. The
// write is atomic: a `<path>.tmp.<pid>` file in the same folder is written, fsync'd and renamed.
#pragma once
#include <filesystem>
#include <map>
#include <string>

#include "engine/tensor/tensor.h"

namespace loft {

void write_safetensors(const std::filesystem::path& path,
                       const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace loft
