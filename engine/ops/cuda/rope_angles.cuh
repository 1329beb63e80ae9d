// A token's RoPE table in shared memory, built by the whole block: cos θ_i in table[0, half) and
// sin θ_i (−sin θ_i when inverse) in table[half, 2·half), θ_i = float(position)·inv_freq[i] with
// full-precision sincosf. rope.cu and head_norm_rope.cu rotate from it, so both use the same angles.
#pragma once
#include <cstdint>

namespace loft::ops::cuda_kernels {

__device__ __forceinline__ void rope_angles(float* table, int32_t position, const float* inv_freq, int half,
                                            bool inverse) {
  const float pos = float(position);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float s, c;
    sincosf(pos * inv_freq[i], &s, &c);
    table[i] = c;
    table[half + i] = inverse ? -s : s;
  }
  __syncthreads();
}

}  // namespace loft::ops::cuda_kernels
