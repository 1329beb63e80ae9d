#include "export/gguf/llama_tensors.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/core/error.h"
#include "models/llama/weights.h"

namespace loft::gguf {

std::optional<OutType> out_type_from_name(std::string_view name) {
  if (name == "f32") return OutType::F32;
  if (name == "f16") return OutType::F16;
  if (name == "bf16") return OutType::BF16;
  if (name == "q8_0") return OutType::Q8_0;
  return std::nullopt;
}

std::string_view out_type_name(OutType t) {
  switch (t) {
    case OutType::F32: return "f32";
    case OutType::F16: return "f16";
    case OutType::BF16: return "bf16";
    case OutType::Q8_0: return "q8_0";
  }
  return "?";
}

FileType file_type_of(OutType t) {
  switch (t) {
    case OutType::F32: return FileType::AllF32;
    case OutType::F16: return FileType::MostlyF16;
    case OutType::BF16: return FileType::MostlyBF16;
    case OutType::Q8_0: return FileType::MostlyQ8_0;
  }
  return FileType::AllF32;
}

std::string gguf_architecture(const llama::LlamaConfig& cfg) {
  using llama::Proj;
  if (cfg.model_type == "llama" || cfg.model_type == "mistral") {
    if (cfg.qk_norm) throw Error("GGUF export: llama.cpp's llama architecture has no q/k norms");
    return "llama";  // convert_hf_to_gguf.py converts MistralForCausalLM as a Llama
  }
  if (cfg.model_type != "qwen2" && cfg.model_type != "qwen3")
    throw Error(cat("GGUF export: no llama.cpp architecture for model_type '", cfg.model_type, "'"));
  // llama.cpp's qwen2 requires q/k/v biases and has no other; qwen3 has none.
  const bool qwen2 = cfg.model_type == "qwen2";
  for (const llama::ProjShape& p : cfg.projections()) {
    const bool qkv = p.proj == Proj::Q || p.proj == Proj::K || p.proj == Proj::V;
    if (cfg.has_bias(p.proj) != (qwen2 && qkv))
      throw Error(cat("GGUF export: llama.cpp's ", cfg.model_type, " architecture ",
                      cfg.has_bias(p.proj) ? "has no" : "needs a", " bias on ", llama::proj_name(p.proj),
                      "_proj"));
  }
  return cfg.model_type;
}

std::vector<LlamaTensor> llama_tensors(const llama::LlamaConfig& cfg) {
  using llama::Proj;
  const int64_t h = cfg.hidden_size;
  // Only the llama architecture runs interleaved RoPE pairs, so only its q/k rows are permuted.
  const bool permute = gguf_architecture(cfg) == "llama";
  const std::pair<Proj, const char*> projs[] = {
      {Proj::Q, "attn_q"},    {Proj::K, "attn_k"},  {Proj::V, "attn_v"},      {Proj::O, "attn_output"},
      {Proj::Gate, "ffn_gate"}, {Proj::Up, "ffn_up"}, {Proj::Down, "ffn_down"}};
  const auto shapes = cfg.projections();
  std::vector<LlamaTensor> out;
  out.push_back({"model.embed_tokens.weight", "token_embd.weight", {cfg.vocab_size, h}});
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    const std::string hf = cat("model.layers.", l, "."), gg = cat("blk.", l, ".");
    const auto projection = [&](Proj p, const char* name) {
      const llama::ProjShape& s = shapes[size_t(p)];
      const Permute perm = !permute ? Permute::None : p == Proj::Q ? Permute::Q : p == Proj::K ? Permute::K : Permute::None;
      out.push_back({llama::hf_proj_name(l, p), gg + name + ".weight", {s.out, s.in}, perm});
      if (cfg.has_bias(p)) out.push_back({llama::hf_bias_name(l, p), gg + name + ".bias", {s.out}, perm});
    };
    out.push_back({hf + "input_layernorm.weight", gg + "attn_norm.weight", {h}});
    for (int i = 0; i < 4; ++i) projection(projs[i].first, projs[i].second);
    if (cfg.qk_norm) {
      out.push_back({hf + "self_attn.q_norm.weight", gg + "attn_q_norm.weight", {cfg.head_dim}});
      out.push_back({hf + "self_attn.k_norm.weight", gg + "attn_k_norm.weight", {cfg.head_dim}});
    }
    out.push_back({hf + "post_attention_layernorm.weight", gg + "ffn_norm.weight", {h}});
    for (int i = 4; i < 7; ++i) projection(projs[i].first, projs[i].second);
  }
  out.push_back({"model.norm.weight", "output_norm.weight", {h}});
  if (!cfg.tie_word_embeddings) out.push_back({"lm_head.weight", "output.weight", {cfg.vocab_size, h}});
  return out;
}

TensorType tensor_type_for(const std::string& gguf_name, std::span<const int64_t> shape, OutType out) {
  const bool is_norm = gguf_name.size() >= 12 && gguf_name.ends_with("_norm.weight");
  if (shape.size() <= 1 || is_norm) return TensorType::F32;
  switch (out) {
    case OutType::F32: return TensorType::F32;
    case OutType::F16: return TensorType::F16;
    case OutType::BF16: return TensorType::BF16;
    case OutType::Q8_0: return shape.back() % 32 == 0 ? TensorType::Q8_0 : TensorType::F16;
  }
  return TensorType::F32;
}

void permute_qk_rows(std::span<const float> w, int64_t rows, int64_t cols, int64_t n_head, std::span<float> out) {
  if (n_head <= 0 || rows % (2 * n_head) != 0)
    throw Error(cat("cannot permute ", rows, " rows for ", n_head, " heads: each head needs an even number of rows"));
  LOFT_CHECK(int64_t(w.size()) == rows * cols && out.size() == w.size(), "permute_qk_rows: sizes do not match");
  const int64_t half = rows / n_head / 2;
  for (int64_t hd = 0; hd < n_head; ++hd)
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t i = 0; i < half; ++i) {
        const int64_t src = hd * 2 * half + s * half + i, dst = hd * 2 * half + i * 2 + s;
        std::copy_n(w.data() + src * cols, cols, out.data() + dst * cols);
      }
}

int64_t permute_heads(const llama::LlamaConfig& cfg, Permute p) {
  return p == Permute::K ? cfg.num_kv_heads : cfg.num_heads;
}

std::vector<float> llama3_rope_factors(const llama::LlamaConfig& cfg) {
  const RopeScaling& s = cfg.rope_scaling;
  const int64_t dim = cfg.head_dim;
  const float base = float(cfg.rope_theta);
  const float factor = float(s.factor), lo = float(s.low_freq_factor), hi = float(s.high_freq_factor);
  const float old_ctx = float(s.original_max_position_embeddings);
  const float low_freq_wavelen = old_ctx / lo, high_freq_wavelen = old_ctx / hi;
  std::vector<float> factors;
  for (int64_t i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(base, float(i) / float(dim));
    const float wavelen = 2.0f * std::numbers::pi_v<float> / freq;
    if (wavelen < high_freq_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      factors.push_back(factor);
    } else {
      const float smooth = (old_ctx / wavelen - lo) / (hi - lo);
      factors.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return factors;
}

}  // namespace loft::gguf
