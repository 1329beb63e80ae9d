#include "export/merged_source.h"

#include <ostream>
#include <set>

#include "engine/ops/ops.h"
#include "engine/peft/method_spec.h"
#include "engine/peft/method_state.h"
#include "engine/quant/quantize.h"
#include "models/llama/fp8_checkpoint.h"
#include "models/llama/loading.h"
#include "models/llama/weights.h"

namespace loft::exporter {

namespace fs = std::filesystem;

namespace {

const std::string kWeightSuffix = ".weight";

std::string module_of(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - kWeightSuffix.size());
}

TensorRole role_of(const std::string& name) {
  if (name == "model.embed_tokens.weight") return TensorRole::Embedding;
  if (name == "lm_head.weight") return TensorRole::LmHead;
  if (name.ends_with("norm.weight")) return TensorRole::Norm;
  if (name.ends_with(".bias")) return TensorRole::Bias;  // a family's frozen bias (Qwen2's q/k/v)
  return TensorRole::Projection;
}

// A fresh F32 host copy of a stored float tensor (F32, BF16, F16, or unscaled F8 codes).
Tensor f32_copy(const Tensor& t) {
  if (t.dtype() == DType::F32) return t.clone();
  if (t.dtype() == DType::F8_E4M3) {
    Tensor out = Tensor::empty(t.shape(), DType::F32);
    quant::dequantize(t, nullptr, out);  // each code's value: no scale
    return out;
  }
  return Tensor::from_vector(t.to_float_vector(), t.shape());
}

// "q_proj", ... (all_lora_targets() lists them in Proj order).
const std::string& target_name(llama::Proj p) { return all_lora_targets().at(size_t(p)); }

}  // namespace

std::string MergedSource::describe() const {
  return method_ ? cat(method_->method, " adapter ", adapter_dir_.string()) : std::string("base model");
}

MergedSource::MergedSource(const fs::path& model_dir, const fs::path& adapter_dir,
                           const std::string& method, std::ostream& note)
    : model_dir_(model_dir),
      adapter_dir_(adapter_dir),
      cfg_(llama::load_llama_config(model_dir)),
      ckpt_(SafetensorsCheckpoint::open(model_dir)) {
  llama::LlamaWeights layout;  // only for the slot list: names and shapes
  const std::vector<llama::WeightSlot> slots = llama::weight_slots(cfg_, layout);
  for (const llama::WeightSlot& s : slots) {
    if (!ckpt_.contains(s.name))
      throw Error(cat(model_dir.string(), ": tensor ", s.name, " is missing from the checkpoint",
                      " (expected shape ", shape_str(s.shape), ")"));
    const SafetensorsEntry& e = ckpt_.info(s.name);
    if (e.shape != s.shape || !is_float(e.dtype))
      throw Error(cat(ckpt_.file_of(s.name).path().string(), ": tensor ", s.name, " is ",
                      dtype_name(e.dtype), " ", shape_str(e.shape), ", expected a float ",
                      shape_str(s.shape)));
    MergedTensorInfo info{s.name, s.shape, role_of(s.name), -1, llama::Proj::Q};
    if (s.name.rfind("model.layers.", 0) == 0)
      info.layer = std::stoll(s.name.substr(std::string("model.layers.").size()));
    if (info.role == TensorRole::Projection)
      for (const llama::ProjShape& p : cfg_.projections())
        if (llama::hf_proj_name(info.layer, p.proj) == s.name) info.proj = p.proj;
    infos_.push_back(std::move(info));
  }
  if (adapter_dir.empty()) {
    if (!method.empty())
      throw UsageError("--method applies to an adapter: without --adapter the base is exported");
    return;
  }

  adapter_ = load_peft_adapter(adapter_dir);
  method_ = llama::method_options_for(*adapter_, method, adapter_dir, note);
  // Every check before any tensor is computed: a module the base lacks, a target without its A/B
  // (pair methods) or without its state (the others: FALQON).
  const MethodSpec& spec = method_spec(method_->method);
  const auto state_of = split_method_state(adapter_->method_state,
                                           (adapter_dir / kMethodStateFile).string());
  std::set<std::string> modules;
  for (const MergedTensorInfo& info : infos_) {
    if (info.role != TensorRole::Projection) continue;
    const std::string module = module_of(info.name);
    modules.insert(module);
    if (!method_->targets.count(target_name(info.proj))) continue;
    if (spec.pair_adapter()) {
      const auto it = adapter_->modules.find(module);
      if (it == adapter_->modules.end())
        throw Error(cat("adapter ", adapter_dir.string(), " has no lora_A/lora_B for ", module));
      const auto& [a, b] = it->second;
      if (a.size(1) != info.shape[1] || b.size(0) != info.shape[0])
        throw Error(cat("adapter ", adapter_dir.string(), ": ", module, " has A ",
                        shape_str(a.shape()), " and B ", shape_str(b.shape()), ", which do not fit ",
                        "the base weight ", shape_str(info.shape)));
    }
    else if (!state_of.count(module))
      throw Error(cat("adapter ", adapter_dir.string(), " has no ", method_->method, " state for ",
                      module, " in ", kMethodStateFile, " (the trained weights are rebuilt from it)"));
  }
  for (const auto& [module, ab] : adapter_->modules)
    if (!modules.count(module))
      throw Error(cat("adapter ", adapter_dir.string(), ": module ", module,
                      " is not in the model ", model_dir.string()));
}

Tensor MergedSource::decoded_f32(const std::string& name) const {
  if (cfg_.quantization) {
    const quant::ScaledFp8 w = llama::read_fp8_weight(ckpt_, *cfg_.quantization, name);
    if (w.defined()) {
      Tensor out = Tensor::empty(w.codes.shape(), DType::F32);
      quant::dequantize(w, out);
      return out;
    }
  }
  return f32_copy(ckpt_.tensor(name));
}

Tensor MergedSource::base_weight(const MergedTensorInfo& info) const {
  LOFT_CHECK(info.role == TensorRole::Projection, info.name, " is not a projection");
  return decoded_f32(info.name);
}

Tensor MergedSource::merged_projection(const MergedTensorInfo& info, quant::ScaledFp8* fp8) const {
  Tensor w = base_weight(info);
  if (!method_) return w;
  const MethodOptions& m = *method_;
  const bool target = m.targets.count(target_name(info.proj)) != 0;
  const std::string module = module_of(info.name);
  const MethodSpec& spec = method_spec(m.method);
  if (!spec.pair_adapter()) {
    if (!target) return w;
    // The trained projection: the method's own (the same quantizer as training, on the exact
    // base), then its saved state over it; e.g. FALQON's rows and A's codes, its scale checked.
    std::mt19937_64 unused;
    const std::unique_ptr<AdaptedLinear> lin =
        spec.linear_factory(m, unused)(module, target_name(info.proj), WeightSource(w));
    std::map<std::string, Tensor> state;
    for (const auto& [name, t] : adapter_->method_state)
      if (name.rfind(module + ".", 0) == 0) state[name] = t;
    restore_method_state({{module, lin.get()}}, state, (adapter_dir_ / kMethodStateFile).string());
    if (auto codes = lin->trained_fp8())
      *fp8 = quant::with_repeated_scale(
          Tensor::from_host(codes->first.data(), info.shape, DType::F8_E4M3), codes->second,
          info.shape[0], info.shape[1]);
    return lin->merged_weight();
  }
  Tensor backbone = spec.export_backbone(w, m);
  if (!target) return backbone;
  const auto& [a, b] = adapter_->modules.at(module);
  ops::gemm(b, a, backbone, {.alpha = m.lora.scaling(), .beta = 1.0f});
  return backbone;
}

MergedTensor MergedSource::read(size_t index) const {
  LOFT_CHECK(index < infos_.size(), "MergedSource::read: index ", index, " of ", infos_.size());
  MergedTensor t;
  t.info = infos_[index];
  const std::string& name = t.info.name;
  if (t.info.role == TensorRole::Projection) {
    t.value = merged_projection(t.info, &t.fp8);
  } else {
    const Tensor stored = ckpt_.tensor(name);
    const bool fp8 = stored.dtype() == DType::F8_E4M3 || stored.dtype() == DType::F8_E5M2;
    t.value = fp8 ? decoded_f32(name) : stored.clone();
  }
  ckpt_.release(name);
  if (cfg_.quantization) {
    const std::string scale = llama::fp8_scale_name(*cfg_.quantization, name);
    if (!scale.empty() && ckpt_.contains(scale)) ckpt_.release(scale);
  }
  return t;
}

}  // namespace loft::exporter
