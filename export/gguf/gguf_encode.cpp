#include "export/gguf/gguf_encode.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/core/error.h"
#include "engine/tensor/dtype.h"

namespace loft::gguf {

void quantize_row_q8_0(const float* x, uint8_t* out, int64_t n) {
  LOFT_CHECK(n % kQ8Block == 0, "Q8_0 row of ", n, " values is not a multiple of ", kQ8Block);
  for (int64_t b = 0; b < n / kQ8Block; ++b, x += kQ8Block, out += kQ8BlockBytes) {
    float amax = 0.0f;
    for (int64_t j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = f32_to_f16(d);
    std::memcpy(out, &dh, 2);
    for (int64_t j = 0; j < kQ8Block; ++j) out[2 + j] = uint8_t(int8_t(std::roundf(x[j] * id)));
  }
}

std::vector<uint8_t> encode_tensor(TensorType type, std::span<const float> data, int64_t row_len) {
  const size_t n = data.size();
  if (row_len <= 0 || n % size_t(row_len) != 0)
    throw Error(cat("tensor data of ", n, " values is not whole rows of ", row_len));
  std::vector<uint8_t> out;
  const auto put16 = [&](uint16_t (*convert)(float)) {
    out.resize(n * 2);
    for (size_t i = 0; i < n; ++i) {
      const uint16_t h = convert(data[i]);
      std::memcpy(&out[2 * i], &h, 2);
    }
  };
  switch (type) {
    case TensorType::F32:
      out.resize(n * 4);
      std::memcpy(out.data(), data.data(), n * 4);
      break;
    case TensorType::F16: put16(f32_to_f16); break;
    case TensorType::BF16: put16(f32_to_bf16); break;
    case TensorType::Q8_0: {
      if (row_len % kQ8Block != 0)
        throw Error(cat("Q8_0 needs rows of a multiple of ", kQ8Block, " values, got ", row_len));
      out.resize(n / kQ8Block * kQ8BlockBytes);
      quantize_row_q8_0(data.data(), out.data(), int64_t(n));  // rows are whole blocks
      break;
    }
    default: throw Error(cat("loft does not encode GGUF tensors as ", tensor_type_name(type)));
  }
  return out;
}

std::vector<float> decode_tensor(TensorType type, std::span<const uint8_t> bytes) {
  const auto fail = [&](size_t unit) {
    throw Error(cat(tensor_type_name(type), " data of ", bytes.size(), " bytes is not whole ", unit, "-byte units"));
  };
  std::vector<float> out;
  const auto get16 = [&](float (*convert)(uint16_t)) {
    if (bytes.size() % 2) fail(2);
    out.resize(bytes.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, &bytes[2 * i], 2);
      out[i] = convert(h);
    }
  };
  switch (type) {
    case TensorType::F32:
      if (bytes.size() % 4) fail(4);
      out.resize(bytes.size() / 4);
      std::memcpy(out.data(), bytes.data(), bytes.size());
      break;
    case TensorType::F16: get16(f16_to_f32); break;
    case TensorType::BF16: get16(bf16_to_f32); break;
    case TensorType::Q8_0: {
      if (bytes.size() % kQ8BlockBytes) fail(size_t(kQ8BlockBytes));
      const size_t blocks = bytes.size() / kQ8BlockBytes;
      out.resize(blocks * kQ8Block);
      for (size_t b = 0; b < blocks; ++b) {
        uint16_t dh;
        std::memcpy(&dh, &bytes[b * kQ8BlockBytes], 2);
        const float d = f16_to_f32(dh);
        for (int64_t j = 0; j < kQ8Block; ++j)
          out[b * kQ8Block + size_t(j)] = d * float(int8_t(bytes[b * kQ8BlockBytes + 2 + size_t(j)]));
      }
      break;
    }
    default: throw Error(cat("loft does not decode GGUF tensors of type ", tensor_type_name(type)));
  }
  return out;
}

}  // namespace loft::gguf
