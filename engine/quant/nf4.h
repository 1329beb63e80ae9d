// NF4 with double quantization, in the bitsandbytes layout QLoRA stores its frozen backbone in
// (docs/methods.md "QLoRA baseline"), 4.127 bits/param:
//   - the weight, flattened row-major, is cut into blocks of 64 (the last may be shorter);
//   - each block keeps its absmax; x/absmax (fp32 division) goes to the nearest of 16 NF4 levels,
//     ties to the lower code; two codes a byte, the first element in the high nibble (an odd
//     numel leaves the last low nibble 0); an all-zero block (absmax 0) codes every element 7 (0.0);
//   - the block absmaxes minus their mean (absmax_offset) are cut into groups of 256; each group
//     keeps the max |difference| (absmax_scale) and codes difference/scale to the nearest entry of
//     the signed 8-bit dynamic map, ties to the lower code (a group of equal absmaxes: scale 0,
//     every code the map's 0).
// Decoding: absmax' = fma(map[absmax_code], scale, offset) (one rounding, so CPU and GPU agree
// whatever the compiler contracts), w = level[code] * absmax' in fp32.
// The offset is the mean of the block absmaxes summed in double in block order, rounded to fp32
// once; the CUDA path copies its absmaxes to the host and uses the same function, so both agree.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft {

constexpr int64_t kNf4BlockSize = 64;     // elements per absmax
constexpr int64_t kNf4AbsmaxGroup = 256;  // block absmaxes per fp32 scale
constexpr int kNf4PadCode = 0;            // the unused low nibble of an odd numel
constexpr int kNf4ZeroCode = 7;           // the level 0.0

// Code 0..15; the fp32 values bitsandbytes uses.
constexpr std::array<float, 16> kNf4Levels = {
    -1.0f,
    -0.6961928009986877f,
    -0.5250730514526367f,
    -0.39491748809814453f,
    -0.28444138169288635f,
    -0.18477343022823334f,
    -0.09105003625154495f,
    0.0f,
    0.07958029955625534f,
    0.16093020141124725f,
    0.24611230194568634f,
    0.33791524171829224f,
    0.44070982933044434f,
    0.5626170039176941f,
    0.7229568362236023f,
    1.0f};

// The signed dynamic map, sorted: for i = 0..6 the midpoints of 2^i+1 points evenly spaced in
// [0.1, 1], times 10^(i-6), both signs; plus 0 and +1 (no -1). Each entry is computed in double
// and rounded to fp32 once.
const std::array<float, 256>& dynamic_map();

// Nearest-level decision thresholds: a value v takes the code equal to the number of thresholds
// strictly below it. Threshold k is the exact midpoint of levels k and k+1 rounded toward -inf to
// fp32, so `v > t` is exactly `v > midpoint` for every fp32 v: exact midpoints go to the lower code.
const std::array<float, 15>& nf4_thresholds();
const std::array<float, 255>& dynamic_map_thresholds();
uint8_t nf4_code(float normalized);
uint8_t dynamic_map_code(float normalized);

int64_t nf4_block_count(int64_t numel);
int64_t nf4_group_count(int64_t numel);  // groups of kNf4AbsmaxGroup blocks

struct Nf4Tensor {
  Tensor codes;               // U8 [ceil(numel/2)]
  Tensor absmax_codes;        // U8 [n_blocks]
  Tensor absmax_scale;        // F32 [ceil(n_blocks/256)]
  float absmax_offset = 0.0f;  // mean of the block absmaxes
  Shape shape;                // of the weight

  int64_t numel() const { return shape_numel(shape); }
  int64_t n_blocks() const { return nf4_block_count(numel()); }
  Device device() const { return codes.device(); }
  size_t nbytes() const;  // codes + absmax codes + scales + the offset
  double bits_per_param() const { return 8.0 * double(nbytes()) / double(numel()); }
  Nf4Tensor to(Device device) const;
};

// The mean the double quantization subtracts (see the header comment).
float nf4_absmax_mean(const float* absmax, int64_t n_blocks);

// Quantizes an F32 or BF16 weight on its own device (CPU reference, or the CUDA kernels, which
// give identical bytes). Throws naming the block when the weight holds a NaN or Inf.
Nf4Tensor quantize_nf4(const Tensor& w);

// Throws naming `fn` when q's arrays do not match its shape or do not live on one device.
void check_nf4(const Nf4Tensor& q, const char* fn);

// The decoded block absmaxes (absmax' above), on the CPU.
std::vector<float> nf4_block_absmax(const Nf4Tensor& q);

// Writes the weight into `out` (shape q.shape, F32 or BF16 — BF16 is the fp32 value rounded to
// nearest even) on q's device; one kernel on CUDA.
void dequantize_nf4_into(const Nf4Tensor& q, Tensor& out);
Tensor dequantize_nf4(const Nf4Tensor& q, DType dtype = DType::F32);

}  // namespace loft
