#include "models/llama/fp8_checkpoint.h"

#include <cmath>
#include <algorithm>

namespace loft::llama {

namespace {

const std::string kWeight = "weight";

// "X.weight" -> "X." + suffix; "" for a tensor that is not a weight (a family's bias), which no
// FP8 scheme scales.
std::string with_suffix(const std::string& weight_name, const std::string& suffix) {
  if (!weight_name.ends_with(kWeight)) return "";
  return weight_name.substr(0, weight_name.size() - kWeight.size()) + suffix;
}

// The scale shapes the scheme allows for a weight [out, in]; the first is the one named in errors.
std::vector<Shape> scale_shapes(const Fp8Checkpoint& q, int64_t out, int64_t in) {
  switch (q.granularity) {
    case Fp8Checkpoint::Granularity::Tensor:
      return {{1}, {}};
    case Fp8Checkpoint::Granularity::Channel:
      return {{out, 1}};
    case Fp8Checkpoint::Granularity::Block:
      return {quant::scale_grid(out, in, q.block_rows, q.block_cols)};
  }
  return {};
}

// compressed-tensors may store a zero point; FP8 weights are symmetric, so it must be all zeros.
void check_zero_point(const SafetensorsCheckpoint& ckpt, const Fp8Checkpoint& q,
                      const std::string& name) {
  if (q.zero_point_name.empty()) return;
  const std::string zp = with_suffix(name, q.zero_point_name);
  if (zp.empty() || !ckpt.contains(zp)) return;
  const Tensor t = ckpt.tensor(zp);
  const auto* b = static_cast<const unsigned char*>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i)
    if (b[i] != 0)
      throw Error(cat(ckpt.file_of(zp).path().string(), ": tensor ", zp,
                      " is a nonzero zero point: asymmetric FP8 weights are not supported"));
}

}  // namespace

std::string fp8_scale_name(const Fp8Checkpoint& q, const std::string& weight_name) {
  return with_suffix(weight_name, q.scale_name);
}

quant::ScaledFp8 read_fp8_weight(const SafetensorsCheckpoint& ckpt, const Fp8Checkpoint& q,
                                 const std::string& name) {
  const SafetensorsEntry& e = ckpt.info(name);
  const std::string file = ckpt.file_of(name).path().string();
  const std::string scale = fp8_scale_name(q, name);
  const bool has_scale = !scale.empty() && ckpt.contains(scale);
  if (e.dtype != DType::F8_E4M3 && e.dtype != DType::F8_E5M2) {
    if (has_scale)
      throw Error(cat(file, ": tensor ", name, " is ", dtype_name(e.dtype), " but has a scale ",
                      scale, " (a scaled FP8 weight is stored F8_E4M3)"));
    return {};
  }
  if (e.dtype == DType::F8_E5M2)
    throw Error(cat(file, ": tensor ", name, " is F8_E5M2; FP8 checkpoints are read with E4M3 ",
                    "weights only (", q.describe(), ")"));
  if (e.shape.size() != 2 || scale.empty())
    throw Error(cat(file, ": tensor ", name, " is F8_E4M3 ", shape_str(e.shape),
                    "; scaled FP8 weights must be 2-D [out, in] and named *.weight"));
  if (!has_scale)
    throw Error(cat(file, ": tensor ", name, " is F8_E4M3 but its scale ", scale,
                    " is missing (", q.describe(), ")"));

  const std::string scale_file = ckpt.file_of(scale).path().string();
  const SafetensorsEntry& s = ckpt.info(scale);
  if (s.dtype != DType::F32 && s.dtype != DType::BF16 && s.dtype != DType::F16)
    throw Error(cat(scale_file, ": tensor ", scale, " is ", dtype_name(s.dtype),
                    ", expected F32 (or BF16/F16) scales for ", name));
  const int64_t out = e.shape[0], in = e.shape[1];
  const std::vector<Shape> allowed = scale_shapes(q, out, in);
  if (std::find(allowed.begin(), allowed.end(), s.shape) == allowed.end())
    throw Error(cat(scale_file, ": tensor ", scale, " has shape ", shape_str(s.shape),
                    ", expected ", shape_str(allowed[0]), " for ", name, " ", shape_str(e.shape),
                    " (", q.describe(), ")"));
  check_zero_point(ckpt, q, name);

  const auto [rows, cols] = q.block_for(out, in);
  const std::vector<float> values = ckpt.tensor(scale).to_float_vector();
  for (size_t i = 0; i < values.size(); ++i)
    if (!(std::isfinite(values[i]) && values[i] >= 0.0f))
      throw Error(cat(scale_file, ": tensor ", scale, " holds ", values[i], " at index ", i,
                      "; scales must be finite and >= 0"));
  const Shape grid = quant::scale_grid(out, in, rows, cols);
  quant::ScaledFp8 w{ckpt.tensor(name), Tensor::from_vector(values, grid), rows, cols};
  quant::check_scaled_fp8(w, name);
  return w;
}

}  // namespace loft::llama
