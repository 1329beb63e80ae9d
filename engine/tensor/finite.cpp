#include "engine/tensor/finite.h"

#include "engine/core/error.h"

namespace loft {

namespace {

// First element whose exponent bits (under `mask`) are all ones, or, for E4M3 (which has no
// infinities), whose low seven bits are all ones.
template <typename Bits>
std::optional<int64_t> scan(const Tensor& t, Bits mask) {
  const Bits* p = t.ptr<const Bits>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i)
    if ((p[i] & mask) == mask) return i;
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> first_nonfinite(const Tensor& t) {
  LOFT_CHECK(t.device().is_cpu(), "first_nonfinite: a host tensor is needed, got ", t.str());
  switch (t.dtype()) {
    case DType::F32: return scan<uint32_t>(t, 0x7F800000u);
    case DType::F16: return scan<uint16_t>(t, uint16_t(0x7C00));
    case DType::BF16: return scan<uint16_t>(t, uint16_t(0x7F80));
    case DType::F8_E4M3: return scan<uint8_t>(t, uint8_t(0x7F));
    case DType::F8_E5M2: return scan<uint8_t>(t, uint8_t(0x7C));
    default: return std::nullopt;
  }
}

void require_finite(const Tensor& t, const std::string& name, const std::string& where) {
  if (const auto i = first_nonfinite(t))
    throw Error(cat(where, ": tensor ", name, " holds NaN or Inf (element ", *i, " of ", t.numel(),
                    ")"));
}

}  // namespace loft
