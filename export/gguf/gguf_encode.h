// Tensor data as GGUF stores it: F32, F16 and BF16 (round-to-nearest-even, as ggml converts), and
// Q8_0 exactly as ggml's quantize_row_q8_0_ref: blocks of 32 values, an fp16 scale
// d = max|x| / 127, then int8 qs = roundf(x * (1/d)) (0 when d is 0). Block = 2 bytes d + 32 qs.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "export/gguf/gguf_types.h"

namespace loft::gguf {

constexpr int64_t kQ8Block = 32;
constexpr int64_t kQ8BlockBytes = 34;

// One Q8_0 row: `n` (a multiple of 32) values into n / 32 blocks at `out`.
void quantize_row_q8_0(const float* x, uint8_t* out, int64_t n);

// `data` (row-major, rows of `row_len` elements) encoded as `type`: F32, F16, BF16 or Q8_0 (then
// row_len must be a multiple of 32). Throws loft::Error for another type or a bad row length.
std::vector<uint8_t> encode_tensor(TensorType type, std::span<const float> data, int64_t row_len);

// The values of encoded data (the inverse of encode_tensor, exact for F32/F16/BF16, dequantized
// d * q for Q8_0). Throws loft::Error for another type or a byte count that does not fit.
std::vector<float> decode_tensor(TensorType type, std::span<const uint8_t> bytes);

}  // namespace loft::gguf
