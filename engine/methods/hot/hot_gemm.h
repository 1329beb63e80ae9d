// HOT's integer dX GEMM and its epilogue (docs/hot.md §8.2): acc = dYq·Wqᵀ over the rotated dimension
// `out`, exact in int32 (|acc| ≤ 49·out for INT4, ≤ 127²·out for INT8, which must stay below 2³¹:
// out ≤ 133,143 at 8 bits), then dx = (float)acc·(s_t·s_w[i]·1/b) [+ dx_lora] [+ dx], rounded once
// to dx's dtype. Paths, all bit-identical because integer accumulation is exact in any order:
//  - CPU: an int32 loop (the reference);
//  - Int8: the codes one per byte through cuBLASLt's INT8 IGEMM (int32 out), or loft's own
//    mma.sync m16n8k32 s8 kernel where cuBLASLt has no algorithm (the Hopper/Blackwell path);
//  - S4: the codes packed two per byte through mma.sync m16n8k64 s4 (sm_80/86/89 tensor cores;
//    ptxas takes it for sm_90/120 too, so it also builds and runs there, for the equality tests).
#pragma once
#include "engine/methods/hot/hot_quant.h"

namespace loft::quant {

enum class HotGemmPath : uint8_t {
  Auto,     // CPU loop; on CUDA S4 where the GPU has INT4 tensor cores (sm_80..89), else Int8
  Int8,     // cuBLASLt IGEMM, falling back to the mma s8 kernel
  Int8Mma,  // loft's mma.sync s8 kernel (tests)
  S4,       // packed s4 mma.sync (4-bit codes only)
};

// The path `path` means on `device`: Auto resolved by the GPU's INT4 support; on the CPU always
// Auto (the int32 loop, whatever was asked).
HotGemmPath hot_resolve_path(HotGemmPath path, Device device);

// 4-bit codes packed two per byte: element k in nibble k & 1 of byte k >> 1, low nibble first,
// two's complement. codes: I8 [rows, k] (k even) -> U8 [rows, k/2], on codes' device.
Tensor hot_pack_s4(const Tensor& codes);

// acc I32 [a.rows_padded(), b.rows_padded()] = a.codes·b.codesᵀ (same bits, same K). The S4
// path uses an operand's `packed` codes when it has them and packs its `codes` otherwise.
Tensor hot_igemm(const HotCodes& a, const HotCodes& b, HotGemmPath path = HotGemmPath::Auto);

// dx [a.rows, b.rows] (F32; or BF16 on CUDA) from acc and the two codes' steps; dx_lora (F32,
// dx's shape) is added second when given, dx's own contents last when accumulate.
void hot_epilogue(const Tensor& acc, const HotCodes& a, const HotCodes& b, const Tensor* dx_lora,
                  Tensor& dx, bool accumulate);

}  // namespace loft::quant
