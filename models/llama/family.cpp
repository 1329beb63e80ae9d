#include "models/llama/family.h"

#include <initializer_list>
#include <vector>

#include "engine/core/error.h"
#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"
#include "models/llama/config.h"

namespace loft::llama {

namespace {

constexpr std::initializer_list<Proj> kAttention = {Proj::Q, Proj::K, Proj::V, Proj::O};
constexpr std::initializer_list<Proj> kQkv = {Proj::Q, Proj::K, Proj::V};
constexpr std::initializer_list<Proj> kMlp = {Proj::Gate, Proj::Up, Proj::Down};

void set_bias(LlamaConfig& c, std::initializer_list<Proj> projs, bool on) {
  for (Proj p : projs) c.bias[size_t(p)] = on;
}

// transformers' sliding-window keys as each family reads them (configuration_<family>.py).
void read_window(const JsonFields& f, LlamaConfig& c) {
  if (c.model_type == "mistral") {
    // MistralConfig: one window for every layer; null = none, absent = its default 4096.
    if (!f.json().contains("sliding_window")) c.sliding_window = 4096;
    else if (f.has("sliding_window")) c.sliding_window = f.positive("sliding_window", kMaxPositions);
  } else if ((c.model_type == "qwen2" || c.model_type == "qwen3") &&
             f.boolean("use_sliding_window", false)) {
    // Qwen's window covers only the layers from max_window_layers on; Qwen2/2.5/3 ship it off.
    f.fail("use_sliding_window", cat("is true; loft does not implement ", c.model_type,
                                     "'s per-layer sliding window (max_window_layers)"));
  }
  // transformers 5 may spell out each layer's attention; loft runs one kind in every layer.
  if (!f.has("layer_types")) return;
  const std::vector<std::string> types = f.strings("layer_types");
  const char* want = c.sliding_window > 0 ? "sliding_attention" : "full_attention";
  if (const int64_t layers = f.positive("num_hidden_layers", kMaxLayers); int64_t(types.size()) != layers)
    f.fail("layer_types", cat("lists ", types.size(), " layers; num_hidden_layers is ", layers));
  for (const std::string& t : types)
    if (t != want)
      f.fail("layer_types", cat("has ", brief(t), "; loft runs ", want, " in every layer of a ",
                                c.model_type, " model with sliding_window ",
                                c.sliding_window > 0 ? cat(c.sliding_window) : "null"));
}

}  // namespace

void read_family(const JsonFields& f, LlamaConfig& c) {
  c.model_type = f.string("model_type", "llama");
  c.bias = {};
  c.qk_norm = false;
  c.sliding_window = 0;
  if (c.model_type == "llama") {  // LlamaAttention / LlamaMLP: bias = attention_bias / mlp_bias
    set_bias(c, kAttention, f.boolean("attention_bias", false));
    set_bias(c, kMlp, f.boolean("mlp_bias", false));
  } else if (c.model_type == "qwen2") {  // Qwen2Attention: q, k, v always biased, o never
    set_bias(c, kQkv, true);
  } else if (c.model_type == "qwen3") {  // Qwen3Attention: q_norm, k_norm; bias = attention_bias
    set_bias(c, kAttention, f.boolean("attention_bias", false));
    c.qk_norm = true;
  } else if (c.model_type != "mistral") {  // MistralAttention: Llama's, never biased
    f.fail("model_type",
           cat("is ", brief(c.model_type), "; loft reads llama, qwen2, qwen3 and mistral checkpoints"));
  }
  read_window(f, c);
}

std::string family_differences(const LlamaConfig& c) {
  std::vector<std::string> parts;
  std::string biased;
  for (const ProjShape& p : c.projections())
    if (c.has_bias(p.proj)) biased += cat(biased.empty() ? "" : "/", proj_name(p.proj));
  if (!biased.empty()) parts.push_back(biased + " bias");
  if (c.qk_norm) parts.push_back("per-head q/k RMSNorm");
  if (c.head_dim * c.num_heads != c.hidden_size)
    parts.push_back(cat("head_dim ", c.head_dim, " (q ", c.q_dim(), " wide, hidden ", c.hidden_size, ")"));
  if (c.sliding_window > 0) parts.push_back(cat("sliding window ", c.sliding_window));
  std::string out;
  for (const std::string& s : parts) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace loft::llama
