// NF4 + double quantization: the tables, the CPU reference, and the device dispatch.
#include "engine/quant/nf4.h"

#include <algorithm>
#include <cmath>

#include "engine/device/profile.h"
#ifdef LOFT_WITH_CUDA
#include "engine/quant/cuda/nf4_cuda.h"
#endif

namespace loft {

namespace {

// Midpoint of two adjacent fp32 levels, exact in double, rounded toward -inf to fp32.
template <size_t N>
std::array<float, N - 1> thresholds_of(const std::array<float, N>& levels) {
  std::array<float, N - 1> t{};
  for (size_t k = 0; k + 1 < N; ++k) {
    const double mid = (double(levels[k]) + double(levels[k + 1])) / 2.0;
    float f = float(mid);
    if (double(f) > mid) f = std::nextafter(f, -INFINITY);
    t[k] = f;
  }
  return t;
}

template <size_t N>
uint8_t count_below(const std::array<float, N>& thresholds, float v) {
  // upper_bound with `v > t`: the number of thresholds strictly below v.
  return uint8_t(std::lower_bound(thresholds.begin(), thresholds.end(), v) - thresholds.begin());
}

std::array<float, 256> build_dynamic_map() {
  std::vector<double> v;
  for (int i = 0; i <= 6; ++i) {
    const int points = (1 << i) + 1;
    const double decade = std::pow(10.0, i - 6);
    for (int j = 0; j + 1 < points; ++j) {
      const double a = 0.1 + 0.9 * j / (points - 1), b = 0.1 + 0.9 * (j + 1) / (points - 1);
      const double mid = decade * (a + b) / 2.0;
      v.push_back(mid);
      v.push_back(-mid);
    }
  }
  v.push_back(0.0);
  v.push_back(1.0);
  LOFT_CHECK(v.size() == 256, "dynamic map has ", v.size(), " entries");
  std::sort(v.begin(), v.end());
  std::array<float, 256> out{};
  for (size_t k = 0; k < 256; ++k) out[k] = float(v[k]);
  return out;
}

void check_weight_dtype(const Tensor& w, const char* fn) {
  LOFT_CHECK(w.defined(), fn, ": undefined tensor");
  if (w.dtype() != DType::F32 && w.dtype() != DType::BF16)
    throw Error(cat(fn, ": tensor ", w.str(), " must be F32 or BF16"));
  if (w.numel() == 0) throw Error(cat(fn, ": tensor ", w.str(), " is empty"));
}

// Level 2 on the CPU: absmax - offset coded per group of 256 against the dynamic map.
void quantize_absmax_cpu(const std::vector<float>& absmax, float offset, uint8_t* codes,
                         float* scales) {
  const int64_t nb = int64_t(absmax.size());
  const uint8_t zero_code = dynamic_map_code(0.0f);
  for (int64_t g = 0; g * kNf4AbsmaxGroup < nb; ++g) {
    const int64_t lo = g * kNf4AbsmaxGroup, hi = std::min(nb, lo + kNf4AbsmaxGroup);
    float s = 0.0f;
    for (int64_t b = lo; b < hi; ++b) s = std::max(s, std::fabs(absmax[b] - offset));
    scales[g] = s;
    for (int64_t b = lo; b < hi; ++b)
      codes[b] = s == 0.0f ? zero_code : dynamic_map_code((absmax[b] - offset) / s);
  }
}

Nf4Tensor quantize_nf4_cpu(const Tensor& w) {
  const std::vector<float> x = w.to_float_vector();  // BF16 widens exactly
  const int64_t n = int64_t(x.size()), nb = nf4_block_count(n);
  Nf4Tensor q;
  q.shape = w.shape();
  q.codes = Tensor::zeros({(n + 1) / 2}, DType::U8);
  q.absmax_codes = Tensor::empty({nb}, DType::U8);
  q.absmax_scale = Tensor::empty({nf4_group_count(n)}, DType::F32);
  uint8_t* codes = q.codes.ptr<uint8_t>();
  std::vector<float> absmax(size_t(nb), 0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t lo = b * kNf4BlockSize, hi = std::min(n, lo + kNf4BlockSize);
    float m = 0.0f;
    for (int64_t i = lo; i < hi; ++i) {
      if (!std::isfinite(x[i]))
        throw Error(cat("quantize_nf4: tensor ", w.str(), " holds ", x[i], " at element ", i,
                        " (block ", b, ")"));
      m = std::max(m, std::fabs(x[i]));
    }
    absmax[b] = m;
    for (int64_t i = lo; i < hi; ++i) {
      const uint8_t c = m == 0.0f ? uint8_t(kNf4ZeroCode) : nf4_code(x[i] / m);
      codes[i / 2] |= uint8_t((i % 2 == 0) ? (c << 4) : c);
    }
  }
  q.absmax_offset = nf4_absmax_mean(absmax.data(), nb);
  quantize_absmax_cpu(absmax, q.absmax_offset, q.absmax_codes.ptr<uint8_t>(),
                      q.absmax_scale.ptr<float>());
  return q;
}

void dequantize_nf4_cpu(const Nf4Tensor& q, Tensor& out) {
  const std::vector<float> absmax = nf4_block_absmax(q);
  const uint8_t* codes = q.codes.ptr<uint8_t>();
  const int64_t n = q.numel();
  const bool bf16 = out.dtype() == DType::BF16;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t byte = codes[i / 2];
    const int c = (i % 2 == 0) ? (byte >> 4) : (byte & 15);
    const float v = kNf4Levels[c] * absmax[i / kNf4BlockSize];
    if (bf16)
      out.ptr<uint16_t>()[i] = f32_to_bf16(v);
    else
      out.ptr<float>()[i] = v;
  }
}

}  // namespace

void check_nf4(const Nf4Tensor& q, const char* fn) {
  const int64_t n = q.numel(), nb = nf4_block_count(n);
  LOFT_CHECK(q.codes.defined() && q.codes.dtype() == DType::U8 && q.codes.numel() == (n + 1) / 2,
             fn, ": codes must be U8 [", (n + 1) / 2, "] for shape ", shape_str(q.shape));
  LOFT_CHECK(q.absmax_codes.defined() && q.absmax_codes.dtype() == DType::U8 &&
                 q.absmax_codes.numel() == nb,
             fn, ": absmax_codes must be U8 [", nb, "] for shape ", shape_str(q.shape));
  LOFT_CHECK(q.absmax_scale.defined() && q.absmax_scale.dtype() == DType::F32 &&
                 q.absmax_scale.numel() == nf4_group_count(n),
             fn, ": absmax_scale must be F32 [", nf4_group_count(n), "] for shape ",
             shape_str(q.shape));
  LOFT_CHECK(q.absmax_codes.device() == q.device() && q.absmax_scale.device() == q.device(), fn,
             ": codes, absmax codes and scales must live on one device");
}

const std::array<float, 256>& dynamic_map() {
  static const std::array<float, 256> map = build_dynamic_map();
  return map;
}

const std::array<float, 15>& nf4_thresholds() {
  static const std::array<float, 15> t = thresholds_of(kNf4Levels);
  return t;
}

const std::array<float, 255>& dynamic_map_thresholds() {
  static const std::array<float, 255> t = thresholds_of(dynamic_map());
  return t;
}

uint8_t nf4_code(float normalized) { return count_below(nf4_thresholds(), normalized); }
uint8_t dynamic_map_code(float normalized) {
  return count_below(dynamic_map_thresholds(), normalized);
}

int64_t nf4_block_count(int64_t numel) { return (numel + kNf4BlockSize - 1) / kNf4BlockSize; }
int64_t nf4_group_count(int64_t numel) {
  return (nf4_block_count(numel) + kNf4AbsmaxGroup - 1) / kNf4AbsmaxGroup;
}

size_t Nf4Tensor::nbytes() const {
  return codes.nbytes() + absmax_codes.nbytes() + absmax_scale.nbytes() + sizeof(absmax_offset);
}

Nf4Tensor Nf4Tensor::to(Device device) const {
  Nf4Tensor out = *this;
  out.codes = codes.to(device);
  out.absmax_codes = absmax_codes.to(device);
  out.absmax_scale = absmax_scale.to(device);
  return out;
}

float nf4_absmax_mean(const float* absmax, int64_t n_blocks) {
  LOFT_CHECK(n_blocks > 0, "nf4_absmax_mean: no blocks");
  double sum = 0.0;
  for (int64_t b = 0; b < n_blocks; ++b) sum += double(absmax[b]);
  return float(sum / double(n_blocks));
}

Nf4Tensor quantize_nf4(const Tensor& w) {
  check_weight_dtype(w, "quantize_nf4");
  if (w.device().is_cuda()) {
#ifdef LOFT_WITH_CUDA
    return quantize_nf4_cuda(w);
#else
    throw Error("quantize_nf4: built without CUDA");
#endif
  }
  return quantize_nf4_cpu(w);
}

std::vector<float> nf4_block_absmax(const Nf4Tensor& q) {
  check_nf4(q, "nf4_block_absmax");
  const std::vector<int64_t> codes = q.absmax_codes.to_int_vector();
  const std::vector<float> scales = q.absmax_scale.to_float_vector();
  const std::array<float, 256>& map = dynamic_map();
  std::vector<float> absmax(codes.size());
  for (size_t b = 0; b < codes.size(); ++b)
    absmax[b] = std::fma(map[size_t(codes[b])], scales[b / kNf4AbsmaxGroup], q.absmax_offset);
  return absmax;
}

void dequantize_nf4_into(const Nf4Tensor& q, Tensor& out) {
  prof::OpScope op_scope("nf4_decode");
  check_nf4(q, "dequantize_nf4");
  if (out.dtype() != DType::F32 && out.dtype() != DType::BF16)
    throw Error(cat("dequantize_nf4: output ", out.str(), " must be F32 or BF16"));
  if (out.shape() != q.shape || out.device() != q.device())
    throw Error(cat("dequantize_nf4: output ", out.str(), " must be ", shape_str(q.shape), " on ",
                    q.device().str()));
  if (q.device().is_cuda()) {
#ifdef LOFT_WITH_CUDA
    return dequantize_nf4_cuda(q, out);
#else
    throw Error("dequantize_nf4: built without CUDA");
#endif
  }
  dequantize_nf4_cpu(q, out);
}

Tensor dequantize_nf4(const Nf4Tensor& q, DType dtype) {
  Tensor out = Tensor::empty(q.shape, dtype, q.device());
  dequantize_nf4_into(q, out);
  return out;
}

}  // namespace loft
