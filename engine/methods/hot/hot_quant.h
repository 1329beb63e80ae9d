// HOT's Hadamard quantization of the frozen-weight dX GEMM (docs/hot.md §2, §8): dY [T, out] and the
// weight W [out, in] are both rotated by a block Walsh–Hadamard along `out` (the GEMM's inner
// dimension, so nothing is un-rotated afterwards: H·Hᵀ = b·I is undone by ÷b in the epilogue)
// and quantized to INT4 (±7) or INT8 (±127):
//  - dY: per token or per tensor absmax, stochastic rounding (Philox counter, docs/hot.md §8.2) or RNE;
//  - W: per input channel absmax (the columns of dX), RNE, computed once per backbone.
// Codes are one per byte, K(= out)-major, padded with zeros to the GEMM's tile multiples
// (hot_numerics.h: K to 128, rows to 16), the layout both the INT8 IGEMM and the packed-s4 GEMM
// read (hot_gemm.h). CPU: the fp32 reference; CUDA: kernels giving the same bits
// (cuda/hot_cuda.h).
#pragma once
#include <cstdint>

#include "engine/tensor/tensor.h"

namespace loft::quant {

enum class HotRound : uint8_t { Stochastic, Nearest };
enum class HotScale : uint8_t { PerToken, PerTensor };

struct HotQuantOptions {
  int bits = 4;  // 4 (codes ±7) or 8 (±127)
  HotScale scale = HotScale::PerToken;
  HotRound round = HotRound::Stochastic;
  // The stochastic rounding counter (docs/hot.md §8.2, one draw per four elements): element (t, o) is
  // code i = t·k_padded + o of the codes tensor and takes word i % 4 of the draw at key = seed,
  // counter = (i / 4 lo, i / 4 hi, step, site), site = (layer·16 + projection)·16 + stream.
  uint64_t seed = 0;
  uint32_t step = 0;
  uint32_t site = 0;
};

// Codes of a [rows, cols] operand rotated along cols, as the GEMM reads them.
struct HotCodes {
  int bits = 4;
  int64_t rows = 0, cols = 0;  // logical: dY [T, out], or W's transpose [in, out]
  int block = 16;              // the Hadamard block along cols
  Tensor codes;   // I8 [round_up(rows, 16), round_up(cols, 128)], zero padding (may be dropped
                  // once packed, when only the s4 path reads them)
  Tensor packed;  // U8 [rows_padded, k_padded/2]: 4-bit codes packed (hot_pack_s4), when made
  Tensor scale;   // F32 [round_up(rows, 16)]: the step of each row, 0 in the padding
  int64_t rows_padded() const { return scale.numel(); }
  int64_t k_padded() const { return (cols + 127) / 128 * 128; }
  Device device() const { return scale.device(); }
};

// The site word of the RNG counter.
inline uint32_t hot_site(uint32_t layer, uint32_t proj, uint32_t stream) {
  return (layer * 16u + proj) * 16u + stream;
}

// Empty codes (zeros) for a [rows, cols] operand on `device`.
HotCodes hot_codes_empty(int64_t rows, int64_t cols, int bits, Device device);

// dY [T, out] (F32 or BF16; CPU or CUDA) -> codes and per-row steps. A NaN/Inf in a scale group
// gives that group zero codes and a NaN step (so dX carries it) and sets *overflow (I32 [1] on
// dY's device, when given) to 1; nothing else clears it.
HotCodes hot_quantize_dy(const Tensor& dy, const HotQuantOptions& opt, Tensor* overflow = nullptr);
// Same into `out` (from hot_codes_empty with dY's shape and opt.bits).
void hot_quantize_dy_into(const Tensor& dy, const HotQuantOptions& opt, HotCodes& out,
                          Tensor* overflow = nullptr);

// W [out, in] (F32 or BF16) -> the codes of its transpose [in, out]: FWHT over 16-row strips,
// per-in-channel absmax c_i, step c_i/qmax, RNE.
HotCodes hot_weight_codes(const Tensor& w, int bits);

// The rotated dY itself (F32 [T, out]): what the codes quantize (LQS, tests).
Tensor hot_rotate_rows(const Tensor& dy);

}  // namespace loft::quant
