#include "engine/ops/cuda/head_tile_map.h"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "engine/core/error.h"

namespace loft::ops::cuda_attention {

namespace {

// cuTensorMapEncodeTiled lives in the driver library; the runtime hands out its address, so loft
// needs no link to libcuda.
PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    const cudaError_t err =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found);
    LOFT_CHECK(err == cudaSuccess && found == cudaDriverEntryPointSuccess && p,
               "attention: the CUDA driver has no cuTensorMapEncodeTiled (", cudaGetErrorString(err), ")");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

bool fits(const Tensor& x) {
  return x.dim() == 3 && x.dtype() == DType::BF16 && x.size(2) == 128 &&
         reinterpret_cast<uintptr_t>(x.data()) % 16 == 0;
}

}  // namespace

CUtensorMap head_tile_map(const Tensor& x, int64_t seq, int box_tokens) {
  LOFT_CHECK(fits(x) && seq > 0 && x.size(0) % seq == 0,
             "attention: no tile map for ", x.str(), " at seq ", seq);
  return head_tile_map(x.data(), x.size(0) / seq, seq, x.size(1), box_tokens);
}

CUtensorMap head_tile_map(const void* data, int64_t rows, int64_t seq, int64_t heads, int box_tokens) {
  const uint64_t d = 128;
  const cuuint64_t dims[4] = {d, uint64_t(heads), uint64_t(seq), uint64_t(rows)};
  const cuuint64_t strides[3] = {d * 2, uint64_t(heads) * d * 2, uint64_t(seq * heads) * d * 2};  // bytes, dims 1..3
  const cuuint32_t box[4] = {64, 1, cuuint32_t(box_tokens), 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult r = encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(data), dims, strides,
                                 box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  LOFT_CHECK(r == CUDA_SUCCESS, "attention: the driver refused a tile map for [", rows * seq, ", ", heads,
             ", 128] at seq ", seq, " (CUresult ", int(r), ")");
  return map;
}

}  // namespace loft::ops::cuda_attention
