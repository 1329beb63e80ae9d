// HOT's dY and W quantizers: validation, the fp32 CPU reference, and the CUDA dispatch.
#include "engine/methods/hot/hot_quant.h"

#include <algorithm>
#include <vector>

#include "engine/core/parallel.h"
#include "engine/device/profile.h"
#include "engine/methods/hot/hot_numerics.h"
#ifdef LOFT_WITH_CUDA
#include "engine/methods/hot/cuda/hot_cuda.h"
#endif

namespace loft::quant {

namespace {

using hot::kGroup;

void check_bits(int bits) {
  LOFT_CHECK(bits == 4 || bits == 8, "HOT codes are 4 or 8 bits, got ", bits);
}

void check_matrix(const Tensor& x, const char* what) {
  LOFT_CHECK(x.defined() && x.dim() == 2, what, " must be 2-D, got ",
             x.defined() ? x.str() : std::string("(undefined)"));
  LOFT_CHECK(x.dtype() == DType::F32 || x.dtype() == DType::BF16, what, " must be F32 or BF16, got ",
             x.str());
}

// Element i of a host F32/BF16 tensor as fp32 (exact).
struct HostReader {
  const void* p;
  bool bf16;
  float operator()(int64_t i) const {
    return bf16 ? bf16_to_f32(static_cast<const uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
  }
};

// Group g (elements 16g..16g+15) of a row of n values, zeros past n, rotated in place.
void rotated_group(const HostReader& row, int64_t row_start, int64_t n, int64_t g, int b,
                   float (&v)[kGroup]) {
  for (int j = 0; j < kGroup; ++j) {
    const int64_t o = g * kGroup + j;
    v[j] = o < n ? row(row_start + o) : 0.0f;
  }
  hot::fwht_group(v, b);
}

// Runs fn(r) for rows [0, n) on host threads, in chunks large enough to amortise them.
void for_rows(int64_t n, int64_t work_per_row, const std::function<void(int64_t)>& fn) {
  const int64_t per_chunk = std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(work_per_row, 1));
  const int64_t chunks = (n + per_chunk - 1) / per_chunk;
  parallel_for(chunks, [&](int64_t c) {
    for (int64_t r = c * per_chunk; r < std::min(n, (c + 1) * per_chunk); ++r) fn(r);
  });
}

// Quantizes row t of dY (z: its rotated values, k_padded long) with `step` into codes; element o
// draws as code t·k_padded + o of the codes tensor (hot_numerics.h: sr_bits).
void encode_row(const std::vector<float>& z, hot::Step step, int64_t t, const HotQuantOptions& opt,
                int8_t* codes) {
  const float qmax = hot::qmax_for(opt.bits);
  const bool sr = opt.round == HotRound::Stochastic;
  for (size_t o = 0; o < z.size(); ++o) {
    const float v = hot::to_code_units(z[o], step);
    codes[o] = int8_t(hot::dy_code(v, qmax, sr, opt.seed, uint64_t(t) * z.size() + o, opt.step,
                                   opt.site));
  }
}

void quantize_dy_cpu(const Tensor& dy, const HotQuantOptions& opt, HotCodes& out, Tensor* overflow) {
  const int64_t t_rows = dy.size(0), n = dy.size(1), kp = out.k_padded(), groups = kp / kGroup;
  const HostReader rd{dy.data(), dy.dtype() == DType::BF16};
  // z for every row (the reference keeps it; the kernels rotate twice instead).
  std::vector<std::vector<float>> z(static_cast<size_t>(t_rows),
                                    std::vector<float>(static_cast<size_t>(kp)));
  std::vector<uint32_t> row_amax(size_t(t_rows), 0);
  for_rows(t_rows, kp, [&](int64_t t) {
    uint32_t m = 0;
    for (int64_t g = 0; g < groups; ++g) {
      float v[kGroup];
      rotated_group(rd, t * n, n, g, out.block, v);
      for (int j = 0; j < kGroup; ++j) {
        z[size_t(t)][size_t(g * kGroup + j)] = v[j];
        m = std::max(m, hot::abs_bits(v[j]));
      }
    }
    row_amax[size_t(t)] = m;
  });
  uint32_t tensor_amax = 0;
  for (uint32_t m : row_amax) tensor_amax = std::max(tensor_amax, m);
  const float qmax = hot::qmax_for(opt.bits);
  int8_t* codes = out.codes.ptr<int8_t>();
  float* scale = out.scale.ptr<float>();
  bool overflowed = false;
  for (int64_t t = 0; t < t_rows; ++t) {
    const uint32_t a = opt.scale == HotScale::PerToken ? row_amax[size_t(t)] : tensor_amax;
    overflowed |= a >= hot::kInfBits;
    const hot::Step st = hot::step_for(a, qmax);
    scale[t] = st.s;
  }
  for_rows(t_rows, kp, [&](int64_t t) {
    const uint32_t a = opt.scale == HotScale::PerToken ? row_amax[size_t(t)] : tensor_amax;
    encode_row(z[size_t(t)], hot::step_for(a, qmax), t, opt, codes + t * kp);
  });
  // Padding rows: codes and steps 0 (the codes are allocated uninitialised, as the kernels write
  // every byte).
  const int64_t rp = out.rows_padded();
  std::fill(codes + t_rows * kp, codes + rp * kp, int8_t(0));
  std::fill(scale + t_rows, scale + rp, 0.0f);
  if (overflowed && overflow) *overflow->ptr<int32_t>() = 1;
}

void weight_codes_cpu(const Tensor& w, HotCodes& out) {
  const int64_t n_out = w.size(0), in = w.size(1), kp = out.k_padded(), groups = kp / kGroup;
  const HostReader rd{w.data(), w.dtype() == DType::BF16};
  const float qmax = hot::qmax_for(out.bits);
  int8_t* codes = out.codes.ptr<int8_t>();
  float* scale = out.scale.ptr<float>();
  for_rows(in, n_out, [&](int64_t i) {
    // Column i of W, rotated in 16-row strips: row i of the transposed codes.
    std::vector<float> z(static_cast<size_t>(kp));
    uint32_t m = 0;
    for (int64_t g = 0; g < groups; ++g) {
      float v[kGroup];
      for (int j = 0; j < kGroup; ++j) {
        const int64_t o = g * kGroup + j;
        v[j] = o < n_out ? rd(o * in + i) : 0.0f;
      }
      hot::fwht_group(v, out.block);
      for (int j = 0; j < kGroup; ++j) {
        z[size_t(g * kGroup + j)] = v[j];
        m = std::max(m, hot::abs_bits(v[j]));
      }
    }
    const hot::Step st = hot::step_for(m, qmax);
    scale[i] = st.s;
    for (int64_t o = 0; o < kp; ++o)
      codes[i * kp + o] = int8_t(hot::rne_code(hot::to_code_units(z[size_t(o)], st), qmax));
  });
}

// Codes for a [rows, cols] operand, zeroed or left for a quantizer that writes every byte.
HotCodes codes_for(int64_t rows, int64_t cols, int bits, Device device, bool zeroed) {
  check_bits(bits);
  LOFT_CHECK(rows >= 0 && cols > 0, "HOT codes need a positive inner dimension, got [", rows, ", ",
             cols, "]");
  HotCodes c;
  c.bits = bits;
  c.rows = rows;
  c.cols = cols;
  c.block = hot::hadamard_block(cols);
  const int64_t rp = hot::round_up(std::max<int64_t>(rows, 1), hot::kRowAlign);
  const Shape shape{rp, hot::round_up(cols, hot::kKAlign)};
  c.codes = zeroed ? Tensor::zeros(shape, DType::I8, device) : Tensor::empty(shape, DType::I8, device);
  c.scale = zeroed ? Tensor::zeros({rp}, DType::F32, device) : Tensor::empty({rp}, DType::F32, device);
  return c;
}

}  // namespace

HotCodes hot_codes_empty(int64_t rows, int64_t cols, int bits, Device device) {
  return codes_for(rows, cols, bits, device, true);
}

void hot_quantize_dy_into(const Tensor& dy, const HotQuantOptions& opt, HotCodes& out,
                          Tensor* overflow) {
  prof::OpScope op_scope("hot_quantize_dy");
  check_matrix(dy, "hot_quantize_dy: dY");
  check_bits(opt.bits);
  LOFT_CHECK(out.rows == dy.size(0) && out.cols == dy.size(1) && out.bits == opt.bits &&
                 out.codes.defined() && out.device() == dy.device(),
             "hot_quantize_dy: codes for [", out.rows, ", ", out.cols, "] ", out.bits,
             "-bit do not fit dY ", dy.str(), " at ", opt.bits, " bits");
  if (overflow)
    LOFT_CHECK(overflow->dtype() == DType::I32 && overflow->numel() == 1 &&
                   overflow->device() == dy.device(),
               "hot_quantize_dy: the overflow flag must be I32 [1] on dY's device, got ",
               overflow->str());
  if (dy.device().is_cpu()) return quantize_dy_cpu(dy, opt, out, overflow);
#ifdef LOFT_WITH_CUDA
  cuda::hot_quantize_dy(dy, opt, out, overflow);
#else
  throw Error(cat("hot_quantize_dy: dY ", dy.str(), " is on a GPU but loft was built without CUDA"));
#endif
}

HotCodes hot_quantize_dy(const Tensor& dy, const HotQuantOptions& opt, Tensor* overflow) {
  check_matrix(dy, "hot_quantize_dy: dY");
  // Not zeroed: the quantizer writes every code and step (a memset would cost as much as a third
  // of the CUDA quantizer).
  HotCodes out = codes_for(dy.size(0), dy.size(1), opt.bits, dy.device(), false);
  hot_quantize_dy_into(dy, opt, out, overflow);
  return out;
}

HotCodes hot_weight_codes(const Tensor& w, int bits) {
  check_matrix(w, "hot_weight_codes: W");
  HotCodes out = hot_codes_empty(w.size(1), w.size(0), bits, w.device());
  if (w.device().is_cpu()) {
    weight_codes_cpu(w, out);
    return out;
  }
#ifdef LOFT_WITH_CUDA
  cuda::hot_weight_codes(w, out);
  return out;
#else
  throw Error(cat("hot_weight_codes: W ", w.str(), " is on a GPU but loft was built without CUDA"));
#endif
}

Tensor hot_rotate_rows(const Tensor& dy) {
  check_matrix(dy, "hot_rotate_rows: dY");
  const int64_t rows = dy.size(0), n = dy.size(1);
  LOFT_CHECK(n > 0, "hot_rotate_rows: dY ", dy.str(), " has no columns");
  Tensor z = Tensor::empty({rows, n}, DType::F32, dy.device());
  if (!dy.device().is_cpu()) {
#ifdef LOFT_WITH_CUDA
    cuda::hot_rotate_rows(dy, z);
    return z;
#else
    throw Error(cat("hot_rotate_rows: dY ", dy.str(), " is on a GPU but loft was built without CUDA"));
#endif
  }
  const HostReader rd{dy.data(), dy.dtype() == DType::BF16};
  const int b = hot::hadamard_block(n);
  float* zp = z.ptr<float>();
  for_rows(rows, n, [&](int64_t t) {
    for (int64_t g = 0; g * kGroup < n; ++g) {
      float v[kGroup];
      rotated_group(rd, t * n, n, g, b, v);
      for (int j = 0; j < kGroup && g * kGroup + j < n; ++j) zp[t * n + g * kGroup + j] = v[j];
    }
  });
  return z;
}

}  // namespace loft::quant
