#include "engine/quant/scaled_fp8.h"

#include <algorithm>
#include <cmath>

#include "engine/quant/fp8.h"
#include "engine/quant/quantize.h"

namespace loft::quant {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

Shape scale_grid(int64_t out, int64_t in, int64_t block_rows, int64_t block_cols) {
  return {ceil_div(out, block_rows), ceil_div(in, block_cols)};
}

void check_scaled_fp8(const ScaledFp8& w, std::string_view what) {
  LOFT_CHECK(w.codes.defined() && w.codes.dtype() == DType::F8_E4M3 && w.codes.dim() == 2 &&
                 w.codes.device().is_cpu(),
             what, ": FP8 codes must be F8_E4M3 [out, in] on the CPU, got ",
             w.codes.defined() ? w.codes.str() : std::string("(undefined)"));
  LOFT_CHECK(w.block_rows > 0 && w.block_cols > 0, what,
             ": FP8 scale blocks must be positive, got ", w.block_rows, "x", w.block_cols);
  const Shape grid = scale_grid(w.out_features(), w.in_features(), w.block_rows, w.block_cols);
  LOFT_CHECK(w.scales.defined() && w.scales.dtype() == DType::F32 && w.scales.shape() == grid &&
                 w.scales.device().is_cpu(),
             what, ": FP8 scales must be F32 ", shape_str(grid), " on the CPU, got ",
             w.scales.defined() ? w.scales.str() : std::string("(undefined)"));
  const float* s = w.scales.ptr<float>();
  for (int64_t i = 0; i < w.scales.numel(); ++i)
    if (!(std::isfinite(s[i]) && s[i] >= 0.0f))
      throw Error(cat(what, ": FP8 scale ", i, " is ", s[i], " (must be finite and >= 0)"));
}

void dequantize(const ScaledFp8& w, Tensor& out) {
  check_scaled_fp8(w, "dequantize");
  LOFT_CHECK(out.shape() == w.codes.shape() && out.device().is_cpu() &&
                 (out.dtype() == DType::F32 || out.dtype() == DType::BF16),
             "dequantize: output ", out.str(), " must be F32 or BF16 ", shape_str(w.codes.shape()),
             " on the CPU");
  const auto& table = code_values(LowpFormat::E4M3);
  const int64_t rows = w.out_features(), cols = w.in_features(), grid_cols = w.scales.size(1);
  const auto* codes = w.codes.ptr<uint8_t>();
  const float* scales = w.scales.ptr<float>();
  const bool f32 = out.dtype() == DType::F32;
  for (int64_t r = 0; r < rows; ++r) {
    const float* srow = scales + (r / w.block_rows) * grid_cols;
    for (int64_t c = 0; c < cols; ++c) {
      const float v = table[codes[r * cols + c]] * srow[c / w.block_cols];
      if (f32)
        out.ptr<float>()[r * cols + c] = v;
      else
        out.ptr<uint16_t>()[r * cols + c] = f32_to_bf16(v);
    }
  }
}

ScaledFp8 quantize_scaled_fp8(const Tensor& w, int64_t block_rows, int64_t block_cols,
                              std::string_view what) {
  LOFT_CHECK(w.defined() && w.dtype() == DType::F32 && w.dim() == 2 && w.device().is_cpu(), what,
             ": FP8 encoding needs an F32 [out, in] weight on the CPU, got ",
             w.defined() ? w.str() : std::string("(undefined)"));
  LOFT_CHECK(block_rows > 0 && block_cols > 0, what, ": FP8 scale blocks must be positive, got ",
             block_rows, "x", block_cols);
  const int64_t rows = w.size(0), cols = w.size(1);
  const Shape grid = scale_grid(rows, cols, block_rows, block_cols);
  ScaledFp8 q{Tensor::empty({rows, cols}, DType::F8_E4M3), Tensor::empty(grid, DType::F32),
              block_rows, block_cols};
  const float* x = w.ptr<float>();
  auto* codes = q.codes.ptr<uint8_t>();
  float* scales = q.scales.ptr<float>();
  for (int64_t br = 0; br < grid[0]; ++br)
    for (int64_t bc = 0; bc < grid[1]; ++bc) {
      const int64_t r0 = br * block_rows, r1 = std::min(rows, r0 + block_rows);
      const int64_t c0 = bc * block_cols, c1 = std::min(cols, c0 + block_cols);
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          const float a = std::fabs(x[r * cols + c]);
          if (a > amax) amax = a;  // NaN compares false: ignored
        }
      if (std::isinf(amax))
        throw Error(cat(what, ": an infinite value in rows ", r0, "..", r1 - 1,
                        " cannot be encoded as FP8"));
      const float s = scale_for_amax(amax, LowpFormat::E4M3);
      scales[br * grid[1] + bc] = s;
      for (int64_t r = r0; r < r1; ++r)
        encode_cpu(LowpFormat::E4M3, x + r * cols + c0, c1 - c0, s, codes + r * cols + c0);
    }
  return q;
}

ScaledFp8 with_repeated_scale(Tensor codes, float scale, int64_t block_rows, int64_t block_cols) {
  LOFT_CHECK(codes.defined() && codes.dim() == 2, "with_repeated_scale: codes must be [out, in]");
  const Shape grid = scale_grid(codes.size(0), codes.size(1), block_rows, block_cols);
  ScaledFp8 q{std::move(codes),
              Tensor::from_vector(std::vector<float>(size_t(shape_numel(grid)), scale), grid),
              block_rows, block_cols};
  check_scaled_fp8(q, "with_repeated_scale");
  return q;
}

std::optional<float> common_scale(const ScaledFp8& w) {
  check_scaled_fp8(w, "common_scale");
  const float* s = w.scales.ptr<float>();
  for (int64_t i = 1; i < w.scales.numel(); ++i)
    if (float_bits(s[i]) != float_bits(s[0])) return std::nullopt;
  if (!(s[0] > 0.0f)) return std::nullopt;
  return s[0];
}

}  // namespace loft::quant
