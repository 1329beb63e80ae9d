// Helpers for the NF4 tests (CPU and GPU): Gaussian weights with awkward blocks mixed in, and a
// byte-for-byte comparison of two Nf4Tensors.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/quant/nf4.h"

namespace loft::test {

// N(0, std²) values; when `awkward`, also one all-zero block, one block with a single large
// outlier and a block of a repeated value, so every guard runs.
inline std::vector<float> nf4_test_values(int64_t n, uint32_t seed, float std = 0.02f,
                                          bool awkward = true) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, std);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  if (awkward && n >= 4 * kNf4BlockSize) {
    std::fill_n(v.begin() + kNf4BlockSize, kNf4BlockSize, 0.0f);
    v[2 * kNf4BlockSize + 5] = 40.0f * std;
    std::fill_n(v.begin() + 3 * kNf4BlockSize, kNf4BlockSize, -std);
  }
  return v;
}

inline Tensor nf4_test_weight(const Shape& shape, uint32_t seed) {
  return Tensor::from_vector(nf4_test_values(shape_numel(shape), seed), shape);
}

template <typename T>
std::vector<T> host_values(const Tensor& t) {
  const Tensor h = t.to(Device::cpu());
  const T* p = h.ptr<T>();
  return std::vector<T>(p, p + h.numel());
}

// Same shape, offset (bitwise), codes, absmax codes and scales (bitwise).
inline ::testing::AssertionResult same_nf4(const Nf4Tensor& a, const Nf4Tensor& b) {
  if (a.shape != b.shape)
    return ::testing::AssertionFailure() << "shapes " << shape_str(a.shape) << " vs "
                                         << shape_str(b.shape);
  if (std::memcmp(&a.absmax_offset, &b.absmax_offset, sizeof(float)) != 0)
    return ::testing::AssertionFailure() << "offsets " << a.absmax_offset << " vs "
                                         << b.absmax_offset;
  const auto first_diff = [](const auto& x, const auto& y) -> std::string {
    if (x.size() != y.size()) return "sizes differ";
    for (size_t i = 0; i < x.size(); ++i)
      if (std::memcmp(&x[i], &y[i], sizeof(x[i])) != 0)
        return "differ first at " + std::to_string(i) + ": " + std::to_string(+x[i]) + " vs " +
               std::to_string(+y[i]);
    return "";
  };
  const std::string codes = first_diff(host_values<uint8_t>(a.codes), host_values<uint8_t>(b.codes));
  if (!codes.empty()) return ::testing::AssertionFailure() << "codes " << codes;
  const std::string ac =
      first_diff(host_values<uint8_t>(a.absmax_codes), host_values<uint8_t>(b.absmax_codes));
  if (!ac.empty()) return ::testing::AssertionFailure() << "absmax codes " << ac;
  const std::string sc =
      first_diff(host_values<float>(a.absmax_scale), host_values<float>(b.absmax_scale));
  if (!sc.empty()) return ::testing::AssertionFailure() << "absmax scales " << sc;
  return ::testing::AssertionSuccess();
}

}  // namespace loft::test
