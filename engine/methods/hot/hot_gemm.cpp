// HOT's integer GEMM and epilogue: validation, the CPU reference, and the CUDA dispatch.
#include "engine/methods/hot/hot_gemm.h"

#include <algorithm>

#include "engine/core/parallel.h"
#include "engine/device/profile.h"
#include "engine/methods/hot/hot_numerics.h"
#ifdef LOFT_WITH_CUDA
#include "engine/methods/hot/cuda/hot_cuda.h"
#endif

namespace loft::quant {

namespace {

void check_codes(const HotCodes& c, const char* what) {
  LOFT_CHECK(c.scale.defined() && c.scale.dtype() == DType::F32 && c.rows_padded() >= c.rows,
             what, ": not HOT codes (hot_codes_empty)");
  if (c.codes.defined())
    LOFT_CHECK(c.codes.dtype() == DType::I8 &&
                   c.codes.shape() == Shape({c.rows_padded(), c.k_padded()}) &&
                   c.codes.device() == c.device(),
               what, ": codes ", c.codes.str(), " do not match [", c.rows_padded(), ", ",
               c.k_padded(), "]");
  if (c.packed.defined())
    LOFT_CHECK(c.packed.dtype() == DType::U8 &&
                   c.packed.shape() == Shape({c.rows_padded(), c.k_padded() / 2}) &&
                   c.packed.device() == c.device(),
               what, ": packed codes ", c.packed.str(), " do not match [", c.rows_padded(), ", ",
               c.k_padded() / 2, "]");
}

const Tensor& byte_codes(const HotCodes& c, const char* what) {
  LOFT_CHECK(c.codes.defined(), what, ": this GEMM path needs the codes one per byte (only the "
             "packed s4 codes are kept)");
  return c.codes;
}

void check_pair(const HotCodes& a, const HotCodes& b) {
  check_codes(a, "hot GEMM: A");
  check_codes(b, "hot GEMM: B");
  LOFT_CHECK(a.bits == b.bits && a.cols == b.cols && a.block == b.block &&
                 a.device() == b.device(),
             "hot GEMM: A [", a.rows, ", ", a.cols, "] ", a.bits, "-bit and B [", b.rows, ", ", b.cols,
             "] ", b.bits, "-bit must share bits, K and device");
  // INT8 accumulation bound: 127²·K < 2³¹.
  LOFT_CHECK(a.bits == 4 || a.cols <= 133143, "hot GEMM: 8-bit codes over K = ", a.cols,
             " could overflow int32 (at most 133143)");
}

Tensor igemm_cpu(const HotCodes& a, const HotCodes& b) {
  const int64_t m = a.rows_padded(), n = b.rows_padded(), k = a.k_padded();
  Tensor acc = Tensor::empty({m, n}, DType::I32);
  const int8_t* pa = byte_codes(a, "hot GEMM: A").ptr<int8_t>();
  const int8_t* pb = byte_codes(b, "hot GEMM: B").ptr<int8_t>();
  int32_t* pc = acc.ptr<int32_t>();
  const int64_t kk = std::min(k, hot::round_up(a.cols, 16));  // the zero tail adds nothing
  parallel_for(m, [&](int64_t i) {
    const int8_t* ra = pa + i * k;
    for (int64_t j = 0; j < n; ++j) {
      const int8_t* rb = pb + j * k;
      int32_t s = 0;
      for (int64_t x = 0; x < kk; ++x) s += int32_t(ra[x]) * int32_t(rb[x]);
      pc[i * n + j] = s;
    }
  });
  return acc;
}

void epilogue_cpu(const Tensor& acc, const HotCodes& a, const HotCodes& b, const Tensor* dx_lora,
                  Tensor& dx, bool accumulate) {
  const int64_t rows = a.rows, cols = b.rows, ld = acc.size(1);
  const float inv_block = 1.0f / float(a.block);  // a power of two: exact
  const int32_t* pc = acc.ptr<int32_t>();
  const float* st = a.scale.ptr<float>();
  const float* sw = b.scale.ptr<float>();
  const float* lora = dx_lora ? dx_lora->ptr<float>() : nullptr;
  float* out = dx.ptr<float>();
  parallel_for(rows, [&](int64_t t) {
    for (int64_t i = 0; i < cols; ++i) {
      float v = hot::dx_base(pc[t * ld + i], st[t], sw[i], inv_block);
      if (lora) v = hot::add_rn(v, lora[t * cols + i]);
      if (accumulate) v = hot::add_rn(out[t * cols + i], v);
      out[t * cols + i] = v;
    }
  });
}

}  // namespace

HotGemmPath hot_resolve_path(HotGemmPath path, Device device) {
  if (device.is_cpu()) return HotGemmPath::Auto;  // one path: the int32 loop
  if (path != HotGemmPath::Auto) return path;
#ifdef LOFT_WITH_CUDA
  return cuda::hot_has_int4_tensor_cores(device.index) ? HotGemmPath::S4 : HotGemmPath::Int8;
#else
  return path;
#endif
}

Tensor hot_pack_s4(const Tensor& codes) {
  LOFT_CHECK(codes.defined() && codes.dtype() == DType::I8 && codes.dim() == 2 &&
                 codes.size(1) % 2 == 0,
             "hot_pack_s4: codes must be I8 [rows, even k], got ",
             codes.defined() ? codes.str() : std::string("(undefined)"));
  Tensor packed = Tensor::empty({codes.size(0), codes.size(1) / 2}, DType::U8, codes.device());
  if (!codes.device().is_cpu()) {
#ifdef LOFT_WITH_CUDA
    cuda::hot_pack_s4(codes, packed);
    return packed;
#else
    throw Error(cat("hot_pack_s4: ", codes.str(), " is on a GPU but loft was built without CUDA"));
#endif
  }
  const int8_t* c = codes.ptr<int8_t>();
  uint8_t* p = packed.ptr<uint8_t>();
  for (int64_t i = 0; i < packed.numel(); ++i)
    p[i] = uint8_t((uint8_t(c[2 * i]) & 0xfu) | ((uint8_t(c[2 * i + 1]) & 0xfu) << 4));
  return packed;
}

Tensor hot_igemm(const HotCodes& a, const HotCodes& b, HotGemmPath path) {
  prof::OpScope op_scope("hot_igemm");
  check_pair(a, b);
  const Device dev = a.device();
  path = hot_resolve_path(path, dev);
  if (path == HotGemmPath::S4)
    LOFT_CHECK(a.bits == 4, "hot GEMM: the packed s4 path needs 4-bit codes, got ", a.bits);
  if (dev.is_cpu()) return igemm_cpu(a, b);
#ifdef LOFT_WITH_CUDA
  Tensor acc = Tensor::empty({a.rows_padded(), b.rows_padded()}, DType::I32, dev);
  if (path == HotGemmPath::S4) {
    auto packed = [](const HotCodes& c, const char* what) {
      return c.packed.defined() ? c.packed : hot_pack_s4(byte_codes(c, what));
    };
    cuda::hot_mma_s4(packed(a, "hot GEMM: A"), packed(b, "hot GEMM: B"), acc);
    return acc;
  }
  const Tensor& ca = byte_codes(a, "hot GEMM: A");
  const Tensor& cb = byte_codes(b, "hot GEMM: B");
  if (path == HotGemmPath::Int8Mma || !cuda::hot_igemm_cublaslt(ca, cb, acc))
    cuda::hot_mma_s8(ca, cb, acc);
  return acc;
#else
  throw Error(cat("hot GEMM: codes on ", dev.str(), " but loft was built without CUDA"));
#endif
}

void hot_epilogue(const Tensor& acc, const HotCodes& a, const HotCodes& b, const Tensor* dx_lora,
                  Tensor& dx, bool accumulate) {
  check_pair(a, b);
  LOFT_CHECK(acc.dtype() == DType::I32 && acc.dim() == 2 && acc.size(0) >= a.rows &&
                 acc.size(1) >= b.rows,
             "hot epilogue: acc ", acc.str(), " must be I32 with at least [", a.rows, ", ", b.rows,
             "]");
  LOFT_CHECK(dx.dim() == 2 && dx.size(0) == a.rows && dx.size(1) == b.rows &&
                 (dx.dtype() == DType::F32 || (dx.dtype() == DType::BF16 && dx.device().is_cuda())),
             "hot epilogue: dx ", dx.str(), " must be [", a.rows, ", ", b.rows,
             "] F32 (or BF16 on CUDA)");
  if (dx_lora)
    LOFT_CHECK(dx_lora->dtype() == DType::F32 && dx_lora->shape() == dx.shape() &&
                   dx_lora->device() == dx.device(),
               "hot epilogue: dx_lora ", dx_lora->str(), " must be F32 of dx's shape ", dx.str());
  for (const Tensor* t : {&acc, const_cast<const Tensor*>(&dx)})
    LOFT_CHECK(t->device() == a.device(), "hot epilogue: ", t->str(),
               " is not on the codes' device ", a.device().str());
  if (dx.numel() == 0) return;
  if (dx.device().is_cpu()) return epilogue_cpu(acc, a, b, dx_lora, dx, accumulate);
#ifdef LOFT_WITH_CUDA
  cuda::hot_epilogue(acc, a.scale, b.scale, 1.0f / float(a.block), dx_lora, dx, accumulate);
#endif
}

}  // namespace loft::quant
