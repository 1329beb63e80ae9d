// A frozen projection weight as the checkpoint provides it, handed to a method's LinearFactory:
// dense in the compute dtype, or FP8 E4M3 codes with block scales (quant::ScaledFp8) kept as
// stored until the method says how it wants them, one projection at a time:
//  - dense(): the weight in the compute dtype (LoRA, QLoRA's NF4 input, FALQON's frozen
//    non-targets); FP8 is decode(code) x scale in fp32, rounded once to the compute dtype.
//  - values(): what a method that quantizes the weight itself starts from. Dense: the tensor as
//    loaded. FP8: the exact fp32 values, so no bf16 rounding sits between the checkpoint's values
//    and the method's own codes (FALQON's per-tensor requantization, HALO's rotation).
//  - e4m3_codes(): the checkpoint's codes themselves with their one scale, when every block shares
//    one scale (per-tensor checkpoints): a per-tensor E4M3 method takes them bit for bit.
#pragma once
#include <optional>

#include "engine/quant/quantize.h"
#include "engine/quant/scaled_fp8.h"

namespace loft {

class WeightSource {
 public:
  // A dense weight [out, in] in the compute dtype on the compute device (implicit: the usual case).
  WeightSource(Tensor dense);  // NOLINT(google-explicit-constructor)
  // FP8 codes and scales on the CPU, for a model computing in `compute_dtype` on `device`.
  WeightSource(quant::ScaledFp8 fp8, DType compute_dtype, Device device);

  int64_t out_features() const;
  int64_t in_features() const;
  DType compute_dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool is_fp8() const { return fp8_.defined(); }

  Tensor dense() const;
  // A factory written for dense weights (a lambda taking Tensor) gets dense().
  operator Tensor() const { return dense(); }  // NOLINT(google-explicit-constructor)
  Tensor values() const;
  // Codes F8_E4M3 [out, in] and scale F32 [1] on the device; nullopt for a dense weight or blocks
  // with different scales.
  std::optional<quant::QuantizedTensor> e4m3_codes() const;

 private:
  Tensor dense_;
  quant::ScaledFp8 fp8_;
  DType dtype_;
  Device device_;
};

}  // namespace loft
