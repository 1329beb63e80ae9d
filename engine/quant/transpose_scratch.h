// The transposed codes of a frozen weight, made just before the GEMM that reads them. FALQON and
// HALO run dX = dY·W as a low-precision GEMM, which takes both operands K-major, so W's codes
// [out, in] are needed as [in, out]. They used to keep that copy for every weight (at llama-13b,
// ~12 GiB); now each backward transposes into one buffer per device that every projection
// shares, grown to the largest weight asked for (issue 15).
#pragma once
#include <memory>

#include "engine/tensor/tensor.h"

namespace loft::quant {

class TransposeScratch {
 public:
  // The scratch of `device`, shared by every holder: made on first use, freed with its last holder.
  static std::shared_ptr<TransposeScratch> of(Device device);

  explicit TransposeScratch(Device device) : device_(device) {}
  // codesᵀ [cols, rows] (same dtype) in the scratch; codes 2-D one-byte codes on this device.
  // The view holds until the next call on this device by any holder: all work on a device is
  // queued in order on one stream, so a GEMM queued before that call reads it intact. (One host
  // thread drives a device; a caller that needs two at once must copy one.)
  Tensor transposed(const Tensor& codes);
  size_t capacity() const { return buf_.defined() ? buf_.nbytes() : 0; }

 private:
  Device device_;
  Tensor buf_;  // U8 [capacity]
};

}  // namespace loft::quant
