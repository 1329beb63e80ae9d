#include "export/peft_export.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <ostream>

#include "engine/core/progress.h"
#include "engine/io/atomic_file.h"
#include "engine/ops/ops.h"
#include "engine/peft/low_rank.h"
#include "engine/peft/method_spec.h"
#include "engine/quant/quantize.h"
#include "export/metadata.h"

namespace loft::exporter {

namespace fs = std::filesystem;

namespace {

struct Sums {
  double diff = 0, ref = 0;
  double rel() const { return ref > 0 ? std::sqrt(diff / ref) : 0.0; }
};

double sum_sq(const Tensor& t) { return ops::sum_squares(t); }

// ||a − b||² (F32, same shape, CPU).
double diff_sq(const Tensor& a, const Tensor& b) {
  Tensor d = a.clone();
  ops::axpy(-1.0f, b, d);
  return sum_sq(d);
}

// The per-tensor E4M3 rounding of W (FALQON's quantizer), as ||W − deq(Q(W))||².
double fp8_rounding_sq(const Tensor& w) {
  const Tensor back = quant::dequantize(quant::quantize(w, quant::LowpFormat::E4M3));
  return diff_sq(w, back);
}

std::string pct(double x) { return cat(std::round(x * 1e4) / 1e2, "%"); }

}  // namespace

PeftExport fit_peft_export(const MergedSource& src, const std::string& task, std::ostream* progress) {
  LOFT_CHECK(src.adapter() && src.method(), "an adapter export needs --adapter");
  const PeftAdapter& trained = *src.adapter();
  const MethodOptions& m = *src.method();
  PeftExport e;
  e.method = m.method;
  PeftAdapter& a = e.adapter;
  a.rank = trained.rank;
  const MethodSpec& spec = method_spec(m.method);
  // A fitted pair (a method whose adapter is not its PEFT pair) carries no α/r scaling.
  a.alpha = spec.pair_adapter() ? trained.alpha : float(m.lora.rank);
  a.target_modules.assign(m.targets.begin(), m.targets.end());
  a.base_model = trained.base_model;
  const float scaling = a.alpha / float(a.rank);

  PeftGapReport& r = e.report;
  r.fitted = !spec.pair_adapter();
  r.layer_gap.assign(size_t(src.config().num_layers), 0.0);
  std::vector<Sums> layer(size_t(src.config().num_layers));
  Sums all;
  double rounding_diff = 0, rounding_ref = 0;

  std::vector<size_t> adapted;
  for (size_t i = 0; i < src.tensors().size(); ++i) {
    const MergedTensorInfo& info = src.tensors()[i];
    if (info.role == TensorRole::Projection &&
        m.targets.count(all_lora_targets().at(size_t(info.proj))))
      adapted.push_back(i);
  }
  Progress bar(progress, task, int64_t(adapted.size()), "projections");
  for (size_t k = 0; k < adapted.size(); ++k) {
    const MergedTensor t = src.read(adapted[k]);
    const std::string module = t.info.name.substr(0, t.info.name.size() - 7);  // "....weight"
    const Tensor w = src.base_weight(t.info);
    std::pair<Tensor, Tensor> ab;
    if (r.fitted) {
      Tensor d = t.value.clone();  // deq(trained) − W: what the adapter must add to the base
      ops::axpy(-1.0f, w, d);
      const LowRankFactors f =
          randomized_svd(d, a.rank, {.oversample = 16, .power_iters = 6, .seed = k});
      ab = {f.right, f.left};
    } else {
      ab = trained.modules.at(module);
    }
    Tensor peft = w.clone();
    ops::gemm(ab.second, ab.first, peft, {.alpha = scaling, .beta = 1.0f});
    const double dsq = diff_sq(t.value, peft), rsq = sum_sq(t.value);
    const double proj_gap = rsq > 0 ? std::sqrt(dsq / rsq) : 0.0;
    r.max_projection_gap = std::max(r.max_projection_gap, proj_gap);
    Sums& l = layer[size_t(t.info.layer)];
    l.diff += dsq;
    l.ref += rsq;
    all.diff += dsq;
    all.ref += rsq;
    rounding_diff += fp8_rounding_sq(w);
    rounding_ref += sum_sq(w);
    a.modules[module] = std::move(ab);
    bar.update(int64_t(k + 1), module);
  }
  bar.finish();
  for (size_t i = 0; i < layer.size(); ++i) r.layer_gap[i] = layer[i].rel();
  r.gap = all.rel();
  r.base_fp8_rounding = rounding_ref > 0 ? std::sqrt(rounding_diff / rounding_ref) : 0.0;
  return e;
}

void print_peft_gap(const PeftExport& e, const std::string& tag, const std::string& kind, std::ostream& log) {
  const PeftAdapter& a = e.adapter;
  const PeftGapReport& r = e.report;
  log << tag << ": " << e.method << " adapter, rank " << a.rank << ", alpha " << a.alpha
      << (r.fitted ? " (best rank-" + std::to_string(a.rank) + " fit of the trained FP8 weights "
                                                              "minus the base, by truncated SVD)"
                   : "")
      << "\n";
  log << tag << ": gap to the trained model ||trained - (W + s*B*A)|| / ||trained||, per layer:";
  for (size_t i = 0; i < r.layer_gap.size(); ++i) log << (i % 8 == 0 ? "\n  " : " ") << pct(r.layer_gap[i]);
  log << "\n" << tag << ": gap " << pct(r.gap) << " over all adapted projections (max one projection "
      << pct(r.max_projection_gap) << "); the base's per-tensor FP8 rounding is "
      << pct(r.base_fp8_rounding) << "\n";
  if (r.large())
    log << "warning: this " << kind << " adapter does not reproduce the trained model faithfully: its gap ("
        << pct(r.gap) << ") exceeds an FP8 rounding of the base (" << pct(r.base_fp8_rounding)
        << ")" << (method_spec(e.method).quantized_backbone() ? " (the adapter was trained against an NF4/quantized backbone)" : "")
        << "; export the trained model itself with --format fp8 or --format bf16\n";
}

PeftGapReport write_peft_export(const MergedSource& src, const fs::path& out, std::ostream& log,
                                std::ostream* progress) {
  const PeftExport e = fit_peft_export(src, "export peft", progress);
  const PeftAdapter& a = e.adapter;
  const PeftGapReport& r = e.report;
  save_peft_adapter(out, a);
  copy_generation_config(src.model_dir(), "", out);
  nlohmann::json report{{"format", "peft"},
                        {"method", e.method},
                        {"rank", a.rank},
                        {"lora_alpha", a.alpha},
                        {"fitted_by_svd", r.fitted},
                        {"gap", r.gap},
                        {"max_projection_gap", r.max_projection_gap},
                        {"layer_gap", r.layer_gap},
                        {"base_fp8_rounding", r.base_fp8_rounding},
                        {"large", r.large()}};
  write_file_atomic(out / "export_report.json", report.dump(2) + "\n");
  print_peft_gap(e, "peft", "PEFT", log);
  return r;
}

}  // namespace loft::exporter
