// TMA tensor maps over attention's [rows · seq, heads, head dim] bf16 tensors, for the Hopper
// kernels that load their tiles with cp.async.bulk.tensor (hopper_async.cuh). The map sees the
// tensor as 4 dimensions, innermost first: (head dim, head, token in the row, row), so a box that
// reaches past `seq` lands zeros instead of the next row's tokens. A box is 64 head-dim columns
// (128 bytes) of one head over `box_tokens` tokens, in the 128-byte swizzle wgmma reads
// (wgmma.cuh): one "half" of a head-dim-128 tile.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "engine/tensor/tensor.h"

namespace loft::ops::cuda_attention {

// The map of x (contiguous [rows · seq, heads, 128] BF16 at a 16-byte aligned address, as
// flash_supports requires of every attention operand); Error (naming x's shape) otherwise, or
// where the driver refuses it.
CUtensorMap head_tile_map(const Tensor& x, int64_t seq, int box_tokens);
// The same from a kernel's arguments: `data` is [rows · seq, heads, 128] BF16, 16-byte aligned.
CUtensorMap head_tile_map(const void* data, int64_t rows, int64_t seq, int64_t heads, int box_tokens);

}  // namespace loft::ops::cuda_attention
