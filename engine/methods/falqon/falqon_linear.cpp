#include "engine/methods/falqon/falqon_linear.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "engine/device/profile.h"
#include "engine/methods/falqon/falqon_ops.h"
#include "engine/ops/ops.h"
#include "engine/peft/low_rank.h"
#include "engine/peft/shared_input.h"
#include "engine/quant/code_transpose.h"
#include "engine/quant/fp8.h"
#include "engine/quant/lowp_gemm.h"
#include "engine/quant/quantize.h"

namespace loft {

namespace {

// Each projection draws its own random directions: the seed mixed with the module name (FNV-1a,
// then a splitmix64 finalizer).
uint64_t module_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  uint64_t z = h ^ (seed + 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A host copy of codes re-typed as raw bytes (U8), or back as E4M3 codes.
Tensor retyped(const Tensor& t, DType dt) {
  const Tensor h = t.to(Device::cpu());
  return Tensor::from_host(h.data(), h.shape(), dt);
}

// W with no quantization error (an exact FP8 base) leaves nothing to seed Â with, and a zero
// Â would never train: O_A = X·Âᵀ = 0, so dB = 0. Â then starts as LoRA's A does
// (Kaiming-uniform, bound 1/√in, from the module's seed) and B̂ = 0, so B̂·Â is still E (zero).
LowRankFactors lora_init_factors(int64_t out, int64_t in, int rank, uint64_t seed, Device dev) {
  std::mt19937_64 rng(seed);
  const float bound = 1.0f / std::sqrt(float(in));
  std::uniform_real_distribution<float> dist(-bound, bound);
  std::vector<float> a(size_t(rank * in));
  for (float& v : a) v = dist(rng);
  LowRankFactors f;
  f.right = Tensor::from_vector(a, {rank, in}, dev);
  f.left = Tensor::zeros({out, rank}, DType::F32, dev);
  f.sigma.assign(size_t(rank), 0.0);
  return f;
}

}  // namespace

FalqonLinear::FalqonLinear(std::string name, const WeightSource& weight, int rank,
                           const FalqonOptions& opt)
    : name_(std::move(name)), opt_(opt), rank_(rank) {
  out_ = weight.out_features();
  in_ = weight.in_features();
  LOFT_CHECK(out_ > 0 && in_ > 0, name_, ": FALQON weight must be a non-empty [out, in], got [",
             out_, ", ", in_, "]");
  LOFT_CHECK(weight.compute_dtype() == DType::F32 || weight.compute_dtype() == DType::BF16, name_,
             ": FALQON weight must be F32 or BF16, got ", dtype_name(weight.compute_dtype()));
  LOFT_CHECK(rank > 0, name_, ": FALQON rank must be positive, got ", rank);
  LOFT_CHECK(opt.topk >= 0, "--falqon-topk must be >= 0 (0 = the rank), got ", opt.topk);
  const Device dev = weight.device();
  const int64_t r = rank;

  wm_ = Tensor::empty({out_ + r, in_}, DType::F8_E4M3, dev);
  scale_ = Tensor::empty({1}, DType::F32, dev);
  Tensor w_codes = backbone();
  const uint64_t seed = module_seed(opt.seed, name_);
  LowRankFactors f;
  if (auto q = weight.e4m3_codes()) {
    // A per-tensor FP8 checkpoint: its codes under its scale are W exactly, so Q(W) is taken bit
    // for bit and E = 0.
    w_codes.copy_from(q->codes);
    scale_.copy_from(q->scale);
  } else {
    // E = W − deq(Q(W)) in fp32 (an FP8 checkpoint's exact fp32 values), and its best rank-r
    // approximation B̂·Â.
    const Tensor w = weight.values();
    quant::quantize_into(w, w_codes, nullptr, scale_);
    Tensor e = Tensor::empty({out_, in_}, DType::F32, dev);
    ops::convert(w, e);
    {
      Tensor deq = Tensor::empty({out_, in_}, DType::F32, dev);
      quant::dequantize(w_codes, &scale_, deq);
      ops::axpy(-1.0f, deq, e);
    }
    f = randomized_svd(e, rank, {.seed = seed});
  }
  if (std::none_of(f.sigma.begin(), f.sigma.end(), [](double s) { return s > 0; }))
    f = lora_init_factors(out_, in_, rank, seed, dev);
  Tensor a_codes = adapter_codes();
  falqon::encode_e4m3(f.right, scale_, a_codes);
  a_hat_ = f.right.to(Device::cpu());
  b_hat_ = f.left.to(Device::cpu());

  changed_ = Tensor::zeros({out_}, DType::U8, dev);
  applied_ = Tensor::zeros({out_, r}, DType::F32, dev);
  b_ = {name_ + ".falqon_B", Tensor::zeros({out_, r}, DType::F32, dev),
        Tensor::zeros({out_, r}, DType::F32, dev)};
  const int64_t k = std::min<int64_t>(opt.topk > 0 ? opt.topk : rank, out_);
  scores_ = Tensor::empty({out_}, DType::F32, dev);
  topk_ = Tensor::empty({k}, DType::I32, dev);
  if (opt.transposed == FalqonOptions::Transposed::keep)
    wt_ = quant::transpose_codes(backbone());
  else
    scratch_ = quant::TransposeScratch::of(dev);
}

void FalqonLinear::forward(const Tensor& x, Tensor& y, LinearSaved* saved, SharedInput* shared) {
  LOFT_CHECK(x.dim() == 2 && x.size(1) == in_ && y.shape() == Shape({x.size(0), out_}) &&
                 y.dtype() == x.dtype(),
             name_, ": FALQON forward of ", x.str(), " into ", y.str(), " (weight [", out_, ", ",
             in_, "])");
  forward_parts(x, &y, saved, shared);
}

void FalqonLinear::forward_parts(const Tensor& x, Tensor* y, LinearSaved* saved,
                                 SharedInput* shared) {
  LOFT_CHECK(x.dim() == 2 && x.size(1) == in_, name_, ": FALQON input ", x.str(),
             " (weight [", out_, ", ", in_, "])");
  const int64_t t = x.size(0);
  quant::QuantizedTensor own;
  const quant::QuantizedTensor* xq;
  {
    prof::Scope s(prof::Part::QuantHadamard);
    xq = &quantized_input(shared, x, "e4m3", [&] {
      return quant::quantize(x, quant::LowpFormat::E4M3, false, shared ? shared->amax() : nullptr);
    }, own);
  }
  // [O | O_A] = Xq·[W; A]ᵀ as two FP8 GEMMs over row slices of the one melded code matrix (one
  // scale): each writes its own output, so no [T, out+r] product is copied apart (docs/perf.md).
  // O_A first, while Xq is fresh in L2; O_A is kept for backward instead of X.
  Tensor oa = Tensor::empty({t, rank_}, x.dtype(), x.device());
  {
    prof::Scope s(prof::Part::AdapterMath);
    quant::gemm_lowp(xq->codes, xq->scale, adapter_codes(), scale_, oa);
  }
  if (y) {
    prof::Scope s(prof::Part::FrozenGemm);
    quant::gemm_lowp(xq->codes, xq->scale, backbone(), scale_, *y);
  }
  if (saved) saved->tensors = {oa};
}

void FalqonLinear::backward(const Tensor& dy, const LinearSaved& saved, Tensor& dx,
                            bool accumulate_dx, const Tensor* dy_amax, SharedBackward*) {
  LOFT_CHECK(saved.tensors.size() == 1, name_, ": FALQON backward without a saved forward");
  const Tensor& oa = saved.tensors[0];
  quant::QuantizedTensor dyq, oaq;
  Tensor wt;
  {
    prof::Scope s(prof::Part::QuantHadamard);
    // The transposed copies make dYqᵀ [out×T] and E4M3(O_A)ᵀ [r×T] K-major for the dB GEMM.
    dyq = quant::quantize(dy, quant::LowpFormat::E5M2, /*also_transposed=*/true, dy_amax);
    oaq = quant::quantize(oa, quant::LowpFormat::E4M3, /*also_transposed=*/true);
    // W's codes [out, in] as [in, out] for the dX GEMM: kept (--falqon-transposed keep), or made
    // in the device's shared scratch (valid until the next layer's backward asks for it).
    wt = wt_.defined() ? wt_ : scratch_->transposed(backbone());
  }
  {
    prof::Scope s(prof::Part::FrozenGemm);
    // dX (+)= dYq·W_q: [T, out] · [in, out]ᵀ with the transposed backbone codes (E5M2 × E4M3):
    // both operands K-major. The sum over the projections that share an input is the GEMM's
    // beta: no [T, in] product apart and no pass adding it (4 passes over [T, in] fewer).
    quant::gemm_lowp(dyq.codes, dyq.scale, wt, scale_, dx, {.beta = accumulate_dx ? 1.0f : 0.0f});
  }
  {
    prof::Scope s(prof::Part::AdapterMath);
    // dB += dYqᵀ·E4M3(O_A): an FP8 GEMM (E5M2 × E4M3, K = tokens) adding onto the fp32 gradient.
    quant::gemm_lowp(dyq.codes_t, dyq.scale, oaq.codes_t, oaq.scale, b_.grad, {.beta = 1.0f});
  }
}

falqon::AfterStep FalqonLinear::after_step_job() {
  // The update patches the kept transposed codes too (their column i is W's row i).
  return {{topk_, b_.value, wm_, wt_, scale_, changed_, applied_}, scores_,
          opt_.buffer == FalqonOptions::Buffer::reset};
}

void FalqonLinear::after_step() { after_steps_of({this}); }

void FalqonLinear::after_steps_of(const std::vector<AdaptedLinear*>& same_method) {
  prof::Scope s(prof::Part::FalqonUpdate);
  std::vector<falqon::AfterStep> jobs;
  for (AdaptedLinear* lin : same_method) jobs.push_back(static_cast<FalqonLinear*>(lin)->after_step_job());
  falqon::after_steps(jobs);
}

Tensor FalqonLinear::merged_weight() const {
  Tensor w = Tensor::empty({out_, in_}, DType::F32, wm_.device());
  quant::dequantize(backbone(), &scale_, w);
  return w.to(Device::cpu());
}

std::optional<std::pair<Tensor, Tensor>> FalqonLinear::peft_pair() const {
  // The trained weight is deq(Q(W)) + the applied rows ≈ W − B̂·Â + ΣΔB_applied·Â: relative to
  // the bf16 base the adapter's B is ΣΔB_applied − B̂ (adding +B̂ counted the FP8 rounding twice).
  Tensor b = applied_.to(Device::cpu()).clone();
  ops::axpy(-1.0f, b_hat_, b);
  return std::pair{a_hat_.clone(), b};
}

std::optional<std::pair<Tensor, float>> FalqonLinear::trained_fp8() const {
  return std::pair{melded_codes().slice(0, out_).clone(), weight_scale()};
}

Tensor FalqonLinear::melded_codes() const { return retyped(wm_, DType::U8); }
Tensor FalqonLinear::transposed_codes() const {
  return quant::transpose_codes(melded_codes().slice(0, out_));
}
Tensor FalqonLinear::kept_transposed() const { return wt_.defined() ? retyped(wt_, DType::U8) : Tensor(); }
float FalqonLinear::weight_scale() const { return scale_.to(Device::cpu()).ptr<float>()[0]; }

std::map<std::string, Tensor> FalqonLinear::method_state() const {
  const Tensor changed = changed_.to(Device::cpu());
  std::vector<int32_t> rows;
  for (int64_t i = 0; i < out_; ++i)
    if (changed.ptr<uint8_t>()[i]) rows.push_back(int32_t(i));
  // Only the changed rows and Â's come to the host, not the whole melded matrix (7 GB over
  // llama3-8b's projections, at every checkpoint): one copy per span of rows whose changed rows
  // are at most kGap apart, so scattered rows cost at most out / kGap copies.
  constexpr int64_t kGap = 32;
  const int64_t n = int64_t(rows.size());
  Tensor row_codes = Tensor::empty({n, in_}, DType::U8);
  for (int64_t t = 0; t < n;) {
    int64_t e = t + 1;
    while (e < n && rows[size_t(e)] - rows[size_t(e - 1)] <= kGap) ++e;
    const int64_t first = rows[size_t(t)];
    const Tensor span = retyped(wm_.slice(first, rows[size_t(e - 1)] - first + 1), DType::U8);
    for (int64_t j = t; j < e; ++j)
      std::memcpy(row_codes.ptr<uint8_t>() + j * in_, span.ptr<uint8_t>() + (rows[size_t(j)] - first) * in_,
                  size_t(in_));
    t = e;
  }
  std::map<std::string, Tensor> st{
      {"falqon_scale", scale_.to(Device::cpu())},
      {"falqon_rows", Tensor::from_vector(rows, {n})},
      {"falqon_row_codes", row_codes},
      {"falqon_a_codes", retyped(wm_.slice(out_, rank_), DType::U8)},
      {"falqon_applied", applied_.to(Device::cpu())}};
  if (opt_.buffer == FalqonOptions::Buffer::accumulate) st["falqon_pending"] = b_.value.to(Device::cpu());
  return st;
}

void FalqonLinear::load_method_state(const std::map<std::string, Tensor>& state) {
  auto get = [&](const std::string& key, DType dt, const Shape& shape) -> Tensor {
    auto it = state.find(key);
    if (it == state.end()) throw Error(cat(name_, ": FALQON state has no ", key));
    const Tensor t = it->second.to(Device::cpu());
    LOFT_CHECK(t.dtype() == dt && (shape.empty() || t.shape() == shape), name_, ".", key, " is ",
               t.str(), ", expected ", dtype_name(dt), " ", shape.empty() ? "[n]" : shape_str(shape));
    return t;
  };
  // The scale is the base's amax / 448: bit-equal on the backend it was trained on. Another
  // backend stores the base in another dtype (bf16 on a GPU, fp32 on the CPU), which moves amax by
  // at most one bf16 rounding (2^-8 relative); the codes then keep this model's scale. A larger
  // difference means another base model.
  const float saved_scale = get("falqon_scale", DType::F32, {1}).ptr<float>()[0];
  const float here = weight_scale();
  if (!(std::abs(saved_scale - here) <= here * 0x1p-7f))
    throw Error(cat(name_, ": the saved FP8 scale ", saved_scale, " differs from the base weight's ", here,
                    " (was the adapter trained on another base model?)"));
  const Tensor rows = get("falqon_rows", DType::I32, {});
  LOFT_CHECK(rows.dim() == 1, name_, ".falqon_rows must be 1-D, got ", rows.str());
  const int64_t n = rows.numel();
  const Tensor row_codes = get("falqon_row_codes", DType::U8, {n, in_});
  const Tensor a_codes = get("falqon_a_codes", DType::U8, {rank_, in_});
  const Tensor applied = get("falqon_applied", DType::F32, {out_, rank_});

  Tensor wm = melded_codes();
  auto* w = wm.ptr<uint8_t>();
  Tensor changed = Tensor::zeros({out_}, DType::U8);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t i = rows.ptr<int32_t>()[t];
    LOFT_CHECK(i >= 0 && i < out_, name_, ".falqon_rows holds row ", i, " outside [0, ", out_, ")");
    std::memcpy(w + i * in_, row_codes.ptr<uint8_t>() + t * in_, size_t(in_));
    changed.ptr<uint8_t>()[i] = 1;
  }
  std::memcpy(w + out_ * in_, a_codes.ptr<uint8_t>(), size_t(rank_ * in_));
  wm_.copy_from(retyped(wm, DType::F8_E4M3));
  if (wt_.defined()) quant::transpose_codes(backbone(), wt_);
  changed_.copy_from(changed);
  applied_.copy_from(applied);
  auto pending = state.find("falqon_pending");
  if (pending != state.end())
    b_.value.copy_from(get("falqon_pending", DType::F32, {out_, rank_}));
  else
    b_.value.zero_();
}

}  // namespace loft
