// FP8 E4M3 weights as checkpoints store them: codes [out, in] and one scale per block of
// block_rows x block_cols elements, the blocks at the bottom and right edges possibly partial, so
// the scale grid is [ceil(out / block_rows), ceil(in / block_cols)]. One layout covers the three
// that checkpoints use: per tensor (one block spans the matrix), per output channel (blocks of
// 1 x in) and transformers' "fp8" 128 x 128 blocks. An element's value is decode(code) x scale, one
// fp32 multiply, as transformers' and compressed-tensors' dequantizers compute it.
#pragma once
#include <array>
#include <optional>
#include <string_view>

#include "engine/tensor/tensor.h"

namespace loft::quant {

struct ScaledFp8 {
  Tensor codes;   // F8_E4M3 [out, in] on the CPU (typically a view of the mapped file)
  Tensor scales;  // F32 [ceil(out / block_rows), ceil(in / block_cols)] on the CPU
  int64_t block_rows = 0, block_cols = 0;

  bool defined() const { return codes.defined(); }
  int64_t out_features() const { return codes.size(0); }
  int64_t in_features() const { return codes.size(1); }
};

// The scale grid [ceil(out / block_rows), ceil(in / block_cols)] for a weight [out, in].
Shape scale_grid(int64_t out, int64_t in, int64_t block_rows, int64_t block_cols);

// Throws Error naming `what` unless codes are F8_E4M3 [out, in] on the CPU, the blocks positive,
// and scales F32 of scale_grid's shape holding finite, non-negative values.
void check_scaled_fp8(const ScaledFp8& w, std::string_view what);

// out [out, in] on the CPU, F32 or BF16: decode(code) x scale in fp32, rounded once to out's dtype.
void dequantize(const ScaledFp8& w, Tensor& out);

// The encoder of this layout, for writing FP8 checkpoints: w F32 [out, in] on the CPU; each
// block's scale is its amax / 448 (1 when the block is all zeros) and each code E4M3(x / scale),
// rounded to nearest even and saturated: per block exactly what quant::quantize does per tensor,
// so one block spanning the matrix gives quantize()'s codes and scale bit for bit. NaN elements
// are ignored by the amax (as quantize() does); an infinite one is an Error naming `what`.
ScaledFp8 quantize_scaled_fp8(const Tensor& w, int64_t block_rows, int64_t block_cols,
                              std::string_view what);

// Codes F8_E4M3 [out, in] (CPU) that hold a weight under ONE scale, described on a finer block
// grid by repeating that scale: the same values exactly (a per-tensor FP8 weight written in a
// per-channel or 128x128-block layout).
ScaledFp8 with_repeated_scale(Tensor codes, float scale, int64_t block_rows, int64_t block_cols);

// The scale every block shares (bit-identical), when there is one and it is positive: then the
// codes with that one scale are the weight exactly, as a per-tensor FP8 method stores it.
std::optional<float> common_scale(const ScaledFp8& w);

}  // namespace loft::quant
