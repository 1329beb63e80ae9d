// The GGUF v3 format's enumerations and sizes (ggml's gguf.h / gguf-py constants.py): metadata
// value types, ggml tensor types with their block layout, llama.cpp file types.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace loft::gguf {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint32_t kVersion = 3;
constexpr uint32_t kDefaultAlignment = 32;
constexpr uint32_t kQuantizationVersion = 2;  // GGML_QNT_VERSION, general.quantization_version
constexpr int kMaxDims = 4;                  // GGML_MAX_DIMS
constexpr size_t kMaxNameBytes = 63;         // GGML_MAX_NAME - 1

enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8, Array = 9,
  U64 = 10, I64 = 11, F64 = 12,
};
// Byte size of a fixed-size value type (0 for String and Array); nullopt for an unknown code.
std::optional<size_t> value_type_size(uint32_t code);
std::string_view value_type_name(ValueType t);

// ggml_type codes as stored in tensor infos.
enum class TensorType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9, Q2_K = 10,
  Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18,
  IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26,
  I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};
struct TypeLayout {
  std::string_view name;
  int64_t block;       // elements per block
  int64_t block_bytes; // bytes per block
};
// The layout of a known ggml type code; nullopt for codes ggml does not define (or removed ones).
std::optional<TypeLayout> tensor_type_layout(uint32_t code);
std::string_view tensor_type_name(TensorType t);
// Bytes of a tensor with `ne` (GGUF order: ne[0] is the contiguous row). Throws loft::Error when
// ne[0] is not a multiple of the block size or the size overflows.
uint64_t tensor_bytes(TensorType t, std::span<const int64_t> ne);

// llama_ftype values written as general.file_type.
enum class FileType : uint32_t { AllF32 = 0, MostlyF16 = 1, MostlyQ8_0 = 7, MostlyBF16 = 32 };

inline uint64_t align_up(uint64_t x, uint64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

}  // namespace loft::gguf
