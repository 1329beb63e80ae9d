// Validation, the CPU references, and dispatch to the CUDA kernels.
#include "engine/methods/falqon/falqon_ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/device/profile.h"
#include "engine/quant/fp8.h"
#include "engine/quant/quantize.h"
#include "engine/quant/scaled_fp8.h"
#ifdef LOFT_WITH_CUDA
#include "engine/methods/falqon/cuda/falqon_cuda.h"
#endif

namespace loft::falqon {

namespace {

void need(bool ok, const char* op, const char* name, const Tensor& t, const char* want) {
  LOFT_CHECK(ok, "falqon ", op, ": ", name, " is ", t.str(), ", expected ", want);
}

void one_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Device d = (*ts.begin())->device();
  for (const Tensor* t : ts)
    LOFT_CHECK(t->device() == d, "falqon ", op, ": tensors on different devices (", t->str(),
               " vs ", d.str(), ")");
}

bool cuda_dispatch(const Tensor& t, const char* op) {
  if (t.device().is_cpu()) return false;
#ifdef LOFT_WITH_CUDA
  (void)op;  // named only in the error of a build without CUDA
  return true;
#else
  throw Error(cat("falqon ", op, ": ", t.str(), " is on a device this build cannot run on"));
#endif
}

uint32_t key_of(float score) { return quant::float_bits(score); }

}  // namespace

void encode_e4m3(const Tensor& x, const Tensor& scale, Tensor& codes) {
  one_device("encode_e4m3", {&x, &scale, &codes});
  need(x.dtype() == DType::F32, "encode_e4m3", "x", x, "F32");
  need(scale.dtype() == DType::F32 && scale.numel() == 1, "encode_e4m3", "scale", scale, "F32 [1]");
  need(codes.dtype() == DType::F8_E4M3 && codes.shape() == x.shape(), "encode_e4m3", "codes", codes,
       "F8_E4M3 of x's shape");
  if (cuda_dispatch(x, "encode_e4m3")) {
#ifdef LOFT_WITH_CUDA
    return cuda::encode_e4m3(x, scale, codes);
#endif
  }
  const float s = *scale.ptr<float>();
  const float* in = x.ptr<float>();
  auto* out = codes.ptr<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = quant::f32_to_fp8_e4m3(in[i] / s);
}

namespace {

void check_row_scores(const Tensor& b, const Tensor& scores) {
  one_device("row_scores", {&b, &scores});
  need(b.dtype() == DType::F32 && b.dim() == 2, "row_scores", "B", b, "F32 [out, r]");
  need(scores.dtype() == DType::F32 && scores.shape() == Shape{b.size(0)}, "row_scores", "scores",
       scores, "F32 [out]");
}

void check_select_topk(const Tensor& scores, const Tensor& idx) {
  one_device("select_topk", {&scores, &idx});
  need(scores.dtype() == DType::F32 && scores.dim() == 1, "select_topk", "scores", scores, "F32 [n]");
  need(idx.dtype() == DType::I32 && idx.dim() == 1 && idx.numel() > 0 &&
           idx.numel() <= scores.numel(),
       "select_topk", "idx", idx, "I32 [k] with 0 < k <= n");
}

void check_apply_rows(const RowUpdate& u) {
  one_device("apply_rows", {&u.idx, &u.b, &u.wm, &u.scale, &u.changed, &u.applied});
  need(u.b.dtype() == DType::F32 && u.b.dim() == 2, "apply_rows", "B", u.b, "F32 [out, r]");
  const int64_t out = u.b.size(0), r = u.b.size(1);
  need(u.wm.dtype() == DType::F8_E4M3 && u.wm.dim() == 2 && u.wm.size(0) == out + r, "apply_rows",
       "Wm", u.wm, "F8_E4M3 [out+r, in]");
  const int64_t in = u.wm.size(1);
  if (u.wt.defined()) {
    one_device("apply_rows", {&u.wm, &u.wt});
    need(u.wt.dtype() == DType::F8_E4M3 && u.wt.shape() == Shape({in, out}), "apply_rows", "Wt", u.wt,
         "F8_E4M3 [in, out] or undefined");
  }
  need(u.idx.dtype() == DType::I32 && u.idx.dim() == 1 && u.idx.numel() <= out, "apply_rows", "idx",
       u.idx, "I32 [k], k <= out");
  need(u.scale.dtype() == DType::F32 && u.scale.numel() == 1, "apply_rows", "scale", u.scale, "F32 [1]");
  need(u.changed.dtype() == DType::U8 && u.changed.shape() == Shape{out}, "apply_rows", "changed",
       u.changed, "U8 [out]");
  need(u.applied.dtype() == DType::F32 && u.applied.shape() == u.b.shape(), "apply_rows", "applied",
       u.applied, "F32 [out, r]");
}

}  // namespace

void row_scores(const Tensor& b, Tensor& scores) {
  check_row_scores(b, scores);
  if (cuda_dispatch(b, "row_scores")) {
#ifdef LOFT_WITH_CUDA
    return cuda::row_scores(b, scores);
#endif
  }
  const int64_t out = b.size(0), r = b.size(1);
  for (int64_t i = 0; i < out; ++i) {
    float s = 0.0f;
    for (int64_t j = 0; j < r; ++j) s += std::fabs(b.ptr<float>()[i * r + j]);
    scores.ptr<float>()[i] = s;
  }
}

void select_topk(const Tensor& scores, Tensor& idx) {
  check_select_topk(scores, idx);
  if (cuda_dispatch(scores, "select_topk")) {
#ifdef LOFT_WITH_CUDA
    return cuda::select_topk(scores, idx);
#endif
  }
  const int64_t n = scores.numel(), k = idx.numel();
  const float* s = scores.ptr<float>();
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  auto before = [&](int32_t a, int32_t b) {
    const uint32_t ka = key_of(s[a]), kb = key_of(s[b]);
    return ka != kb ? ka > kb : a < b;
  };
  std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), before);
  std::sort(order.begin(), order.begin() + k);
  std::copy(order.begin(), order.begin() + k, idx.ptr<int32_t>());
}

void apply_rows(RowUpdate& u, bool zero_all) {
  check_apply_rows(u);
  const int64_t out = u.b.size(0), r = u.b.size(1), in = u.wm.size(1);
  if (cuda_dispatch(u.b, "apply_rows")) {
#ifdef LOFT_WITH_CUDA
    return cuda::apply_rows(u, zero_all);
#endif
  }
  const auto& dec = quant::code_values(quant::LowpFormat::E4M3);  // the CPU update decodes millions of codes
  const float s = *u.scale.ptr<float>(), lim = 448.0f * s;
  const int32_t* idx = u.idx.ptr<int32_t>();
  float* b = u.b.ptr<float>();
  auto* wm = u.wm.ptr<uint8_t>();
  auto* wt = u.wt.defined() ? u.wt.ptr<uint8_t>() : nullptr;
  std::vector<float> aq(size_t(r * in));
  for (int64_t i = 0; i < r * in; ++i) aq[size_t(i)] = dec[wm[out * in + i]] * s;
  for (int64_t t = 0; t < u.idx.numel(); ++t) {
    const int64_t i = idx[t];
    LOFT_CHECK(i >= 0 && i < out, "falqon apply_rows: row index ", i, " outside [0, ", out, ")");
    for (int64_t j = 0; j < in; ++j) {
      float acc = 0.0f;
      for (int64_t c = 0; c < r; ++c) acc = std::fma(b[i * r + c], aq[size_t(c * in + j)], acc);
      const uint8_t old = wm[i * in + j];
      const float w = std::fmin(std::fmax(std::fma(dec[old], s, acc), -lim), lim);
      const uint8_t code = quant::f32_to_fp8_e4m3(w / s);
      if (code != old && (code | old) != 0x80) {  // ±0 swaps are no change
        u.changed.ptr<uint8_t>()[i] = 1;
        wm[i * in + j] = code;
        if (wt) wt[j * out + i] = code;
      }
    }
  }
  for (int64_t t = 0; t < u.idx.numel(); ++t)
    for (int64_t c = 0; c < r; ++c) {
      const int64_t e = int64_t(idx[t]) * r + c;
      u.applied.ptr<float>()[e] += b[e];
      if (!zero_all) b[e] = 0.0f;
    }
  if (zero_all) u.b.zero_();
}

void after_steps(std::vector<AfterStep>& steps) {
  prof::OpScope op_scope("falqon_after_steps");
  if (steps.empty()) return;
  if (cuda_dispatch(steps[0].update.b, "after_steps")) {
#ifdef LOFT_WITH_CUDA
    for (AfterStep& a : steps) {  // the calls below check each on the CPU
      check_row_scores(a.update.b, a.scores);
      check_select_topk(a.scores, a.update.idx);
      check_apply_rows(a.update);
      one_device("after_steps", {&steps[0].update.b, &a.update.b});
    }
    return cuda::after_steps(steps);
#endif
  }
  for (AfterStep& a : steps) {
    row_scores(a.update.b, a.scores);
    select_topk(a.scores, a.update.idx);
    apply_rows(a.update, a.zero_all);
  }
}

}  // namespace loft::falqon
