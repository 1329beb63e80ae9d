#include "models/llama/weights.h"

#include <set>

#include "engine/core/error.h"
#include "engine/tensor/finite.h"
#include "engine/peft/weight_source.h"
#include "engine/quant/quantize.h"
#include "models/llama/fp8_checkpoint.h"

namespace loft::llama {

namespace {

const char* hf_proj_suffix(Proj p) {
  switch (p) {
    case Proj::Q:
      return "self_attn.q_proj";
    case Proj::K:
      return "self_attn.k_proj";
    case Proj::V:
      return "self_attn.v_proj";
    case Proj::O:
      return "self_attn.o_proj";
    case Proj::Gate:
      return "mlp.gate_proj";
    case Proj::Up:
      return "mlp.up_proj";
    case Proj::Down:
      return "mlp.down_proj";
  }
  throw Error("unknown projection");
}

void check_present(const SafetensorsCheckpoint& ckpt, const WeightSlot& w) {
  if (!ckpt.contains(w.name))
    throw Error(cat(ckpt.dir().string(), ": tensor ", w.name, " is missing from the checkpoint",
                    " (expected shape ", shape_str(w.shape), ")"));
  const SafetensorsEntry& e = ckpt.info(w.name);
  const std::string file = ckpt.file_of(w.name).path().string();
  if (e.shape != w.shape)
    throw Error(cat(file, ": tensor ", w.name, " has shape ", shape_str(e.shape), ", expected ",
                    shape_str(w.shape)));
  if (!is_float(e.dtype))
    throw Error(
        cat(file, ": tensor ", w.name, " is ", dtype_name(e.dtype), ", expected a float dtype"));
}

// A layer tensor of the families' (a bias, q_norm, k_norm) that `cfg` does not expect: loading
// without it would silently compute another model.
void check_nothing_dropped(const SafetensorsCheckpoint& ckpt, const LlamaConfig& cfg,
                           const std::vector<WeightSlot>& wanted) {
  std::set<std::string> names;
  for (const WeightSlot& w : wanted) names.insert(w.name);
  for (const std::string& n : ckpt.names()) {
    const bool family_tensor = n.rfind("model.layers.", 0) == 0 &&
                               (n.ends_with(".bias") || n.ends_with("q_norm.weight") ||
                                n.ends_with("k_norm.weight"));
    if (family_tensor && !names.count(n))
      throw Error(cat(ckpt.file_of(n).path().string(), ": tensor ", n,
                      " is not part of a ", cfg.model_type, " model as its config.json describes it",
                      " (see attention_bias, mlp_bias and model_type)"));
  }
}

}  // namespace

Tensor convert_weight(const Tensor& src, DType dtype, Device device) {
  if (src.dtype() == dtype) return src.to(device);
  Tensor host;
  if (src.dtype() == DType::F8_E4M3 || src.dtype() == DType::F8_E5M2) {
    // Each code's value (no scale), rounded to dtype as the quantizer's decode does.
    host = Tensor::empty(src.shape(), dtype, src.device());
    quant::dequantize(src, nullptr, host);
  } else {
    const std::vector<float> f = src.to_float_vector();  // F32/F16/BF16 widened on the host
    if (dtype == DType::F32) {
      host = Tensor::from_vector(f, src.shape());
    } else {
      std::vector<uint16_t> h(f.size());
      for (size_t i = 0; i < f.size(); ++i) h[i] = f32_to_bf16(f[i]);
      host = Tensor::from_host(h.data(), src.shape(), DType::BF16);
    }
  }
  return host.device() == device ? host : host.to(device);
}

Tensor& LlamaLayerWeights::proj(Proj p) {
  switch (p) {
    case Proj::Q:
      return q;
    case Proj::K:
      return k;
    case Proj::V:
      return v;
    case Proj::O:
      return o;
    case Proj::Gate:
      return gate;
    case Proj::Up:
      return up;
    case Proj::Down:
      return down;
  }
  throw Error("unknown projection");
}

const Tensor& LlamaLayerWeights::proj(Proj p) const {
  return const_cast<LlamaLayerWeights*>(this)->proj(p);
}

bool embedding_in_host_memory(const LlamaConfig& cfg, Device device) {
  return device.is_cuda() && !cfg.tie_word_embeddings;
}

std::string hf_proj_name(int64_t layer, Proj p) {
  return cat("model.layers.", layer, ".", hf_proj_suffix(p), ".weight");
}

std::string hf_bias_name(int64_t layer, Proj p) {
  return cat("model.layers.", layer, ".", hf_proj_suffix(p), ".bias");
}

std::vector<WeightSlot> weight_slots(const LlamaConfig& cfg, LlamaWeights& w) {
  w.layers.resize(size_t(cfg.num_layers));
  const int64_t h = cfg.hidden_size;
  std::vector<WeightSlot> slots{{"model.embed_tokens.weight", {cfg.vocab_size, h}, &w.embed},
                                {"model.norm.weight", {h}, &w.final_norm}};
  if (!cfg.tie_word_embeddings)
    slots.push_back({"lm_head.weight", {cfg.vocab_size, h}, &w.lm_head});
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    LlamaLayerWeights& l = w.layers[size_t(i)];
    const std::string pre = cat("model.layers.", i, ".");
    slots.push_back({pre + "input_layernorm.weight", {h}, &l.attn_norm});
    slots.push_back({pre + "post_attention_layernorm.weight", {h}, &l.ffn_norm});
    for (const ProjShape& p : cfg.projections())
      slots.push_back({hf_proj_name(i, p.proj), {p.out, p.in}, &l.proj(p.proj),
                       &l.fp8[size_t(p.proj)], &l.draw[size_t(p.proj)]});
    for (const ProjShape& p : cfg.projections())
      if (cfg.has_bias(p.proj)) slots.push_back({hf_bias_name(i, p.proj), {p.out}, &l.bias[size_t(p.proj)]});
    if (cfg.qk_norm) {
      slots.push_back({pre + "self_attn.q_norm.weight", {cfg.head_dim}, &l.q_norm});
      slots.push_back({pre + "self_attn.k_norm.weight", {cfg.head_dim}, &l.k_norm});
    }
  }
  return slots;
}

LlamaWeights load_llama_weights(const SafetensorsCheckpoint& ckpt, const LlamaConfig& cfg,
                                DType dtype, Device device, Fp8Load fp8, Projections projections) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    throw Error(
        cat("load_llama_weights: dtype ", dtype_name(dtype), " requested; F32 or BF16 only"));
  LlamaWeights w;
  const std::vector<WeightSlot> wanted = weight_slots(cfg, w);
  std::vector<quant::ScaledFp8> scaled(wanted.size());
  const bool host_embed = embedding_in_host_memory(cfg, device);
  for (size_t i = 0; i < wanted.size(); ++i) {  // fail before any copy
    check_present(ckpt, wanted[i]);
    if (cfg.quantization) scaled[i] = read_fp8_weight(ckpt, *cfg.quantization, wanted[i].name);
  }
  check_nothing_dropped(ckpt, cfg, wanted);
  for (size_t i = 0; i < wanted.size(); ++i) {
    const WeightSlot& x = wanted[i];
    const std::string file = ckpt.file_of(x.name).path().string();
    if (scaled[i].defined()) {
      require_finite(scaled[i].codes, x.name, file);
      require_finite(scaled[i].scales, x.name + " (its scales)", file);
    } else {
      require_finite(ckpt.tensor(x.name), x.name, file);
    }
    const Device to = x.dst == &w.embed && host_embed ? Device::cpu() : device;
    if (!scaled[i].defined() && x.fp8 && projections == Projections::as_stored)
      *x.dst = ckpt.tensor(x.name);  // a view of the mapped file: LlamaModel converts it
    else if (!scaled[i].defined())
      *x.dst = convert_weight(ckpt.tensor(x.name), dtype, to);
    else if (fp8 == Fp8Load::keep && x.fp8)
      *x.fp8 = std::move(scaled[i]);
    else
      *x.dst = WeightSource(std::move(scaled[i]), dtype, to).dense();
  }
  return w;
}

}  // namespace loft::llama
