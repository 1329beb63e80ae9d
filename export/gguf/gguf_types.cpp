#include "export/gguf/gguf_types.h"

#include <limits>

#include "engine/core/error.h"

namespace loft::gguf {

std::optional<size_t> value_type_size(uint32_t code) {
  switch (ValueType(code)) {
    case ValueType::U8: case ValueType::I8: case ValueType::Bool: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::String: case ValueType::Array: return 0;
  }
  return std::nullopt;
}

std::string_view value_type_name(ValueType t) {
  static constexpr std::string_view names[] = {"uint8", "int8",   "uint16", "int16",  "uint32",
                                               "int32", "float32", "bool",  "string", "array",
                                               "uint64", "int64", "float64"};
  const auto i = uint32_t(t);
  return i < std::size(names) ? names[i] : std::string_view("unknown");
}

std::optional<TypeLayout> tensor_type_layout(uint32_t code) {
  constexpr int64_t QK_K = 256;
  switch (TensorType(code)) {
    case TensorType::F32: return TypeLayout{"F32", 1, 4};
    case TensorType::F16: return TypeLayout{"F16", 1, 2};
    case TensorType::Q4_0: return TypeLayout{"Q4_0", 32, 2 + 16};
    case TensorType::Q4_1: return TypeLayout{"Q4_1", 32, 2 + 2 + 16};
    case TensorType::Q5_0: return TypeLayout{"Q5_0", 32, 2 + 4 + 16};
    case TensorType::Q5_1: return TypeLayout{"Q5_1", 32, 2 + 2 + 4 + 16};
    case TensorType::Q8_0: return TypeLayout{"Q8_0", 32, 2 + 32};
    case TensorType::Q8_1: return TypeLayout{"Q8_1", 32, 4 + 4 + 32};
    case TensorType::Q2_K: return TypeLayout{"Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4};
    case TensorType::Q3_K: return TypeLayout{"Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12};
    case TensorType::Q4_K: return TypeLayout{"Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12};
    case TensorType::Q5_K: return TypeLayout{"Q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12};
    case TensorType::Q6_K: return TypeLayout{"Q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16};
    case TensorType::Q8_K: return TypeLayout{"Q8_K", QK_K, 4 + QK_K + QK_K / 8};
    case TensorType::IQ2_XXS: return TypeLayout{"IQ2_XXS", QK_K, 2 + QK_K / 4};
    case TensorType::IQ2_XS: return TypeLayout{"IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32};
    case TensorType::IQ3_XXS: return TypeLayout{"IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8};
    case TensorType::IQ1_S: return TypeLayout{"IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16};
    case TensorType::IQ4_NL: return TypeLayout{"IQ4_NL", 32, 2 + 16};
    case TensorType::IQ3_S: return TypeLayout{"IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4};
    case TensorType::IQ2_S: return TypeLayout{"IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16};
    case TensorType::IQ4_XS: return TypeLayout{"IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64};
    case TensorType::I8: return TypeLayout{"I8", 1, 1};
    case TensorType::I16: return TypeLayout{"I16", 1, 2};
    case TensorType::I32: return TypeLayout{"I32", 1, 4};
    case TensorType::I64: return TypeLayout{"I64", 1, 8};
    case TensorType::F64: return TypeLayout{"F64", 1, 8};
    case TensorType::IQ1_M: return TypeLayout{"IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32};
    case TensorType::BF16: return TypeLayout{"BF16", 1, 2};
    case TensorType::TQ1_0: return TypeLayout{"TQ1_0", QK_K, 2 + 4 * 13};
    case TensorType::TQ2_0: return TypeLayout{"TQ2_0", QK_K, 2 + 64};
    case TensorType::MXFP4: return TypeLayout{"MXFP4", 32, 1 + 16};
  }
  return std::nullopt;
}

std::string_view tensor_type_name(TensorType t) {
  const auto layout = tensor_type_layout(uint32_t(t));
  return layout ? layout->name : std::string_view("unknown");
}

uint64_t tensor_bytes(TensorType t, std::span<const int64_t> ne) {
  const auto layout = tensor_type_layout(uint32_t(t));
  if (!layout) throw Error(cat("unknown ggml tensor type ", uint32_t(t)));
  if (ne.empty() || ne[0] % layout->block != 0)
    throw Error(cat("a ", layout->name, " tensor needs rows of a multiple of ", layout->block,
                    " elements, got ", ne.empty() ? 0 : ne[0]));
  constexpr uint64_t kMax = uint64_t(std::numeric_limits<int64_t>::max());
  const uint64_t blocks = uint64_t(ne[0] / layout->block);
  if (blocks > kMax / uint64_t(layout->block_bytes))
    throw Error(cat("a ", layout->name, " tensor's size overflows (dimension 0 is ", ne[0], ")"));
  uint64_t bytes = blocks * uint64_t(layout->block_bytes);
  for (size_t i = 1; i < ne.size(); ++i) {
    if (ne[i] < 0 || (ne[i] != 0 && bytes > kMax / uint64_t(ne[i])))
      throw Error(cat("a ", layout->name, " tensor's size overflows (dimension ", i, " is ", ne[i], ")"));
    bytes *= uint64_t(ne[i]);
  }
  return bytes;
}

}  // namespace loft::gguf
