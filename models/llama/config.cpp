#include "models/llama/config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/core/error.h"
#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"
#include "models/llama/family.h"

namespace loft::llama {

namespace {

using nlohmann::json;

// rope_scaling (transformers 4) or rope_parameters (transformers 5): same keys, the type under
// "rope_type" (older files: "type").
RopeScaling parse_rope_scaling(const JsonFields& f) {
  RopeScaling s;
  s.type = f.has("rope_type") ? f.string("rope_type", "default") : f.string("type", "default");
  if (s.type == "default") return s;
  if (s.type == "linear") {
    s.factor = f.positive_number("factor");
    return s;
  }
  if (s.type == "llama3") {
    s.factor = f.positive_number("factor");
    s.low_freq_factor = f.positive_number("low_freq_factor");
    s.high_freq_factor = f.positive_number("high_freq_factor");
    s.original_max_position_embeddings = int(f.positive("original_max_position_embeddings", kMaxPositions));
    if (s.high_freq_factor <= s.low_freq_factor)
      f.fail("high_freq_factor", cat("(", s.high_freq_factor, ") must exceed low_freq_factor (",
                                     s.low_freq_factor, ")"));
    return s;
  }
  f.fail(f.has("rope_type") ? "rope_type" : "type",
         cat(brief(s.type), " is not supported (default, linear, llama3)"));
}

}  // namespace

const char* proj_name(Proj p) {
  static constexpr const char* kNames[kNumProj] = {"q", "k", "v", "o", "gate", "up", "down"};
  return kNames[size_t(p)];
}

std::array<ProjShape, kNumProj> LlamaConfig::projections() const {
  return {{{Proj::Q, q_dim(), hidden_size},
           {Proj::K, kv_dim(), hidden_size},
           {Proj::V, kv_dim(), hidden_size},
           {Proj::O, hidden_size, q_dim()},
           {Proj::Gate, intermediate_size, hidden_size},
           {Proj::Up, intermediate_size, hidden_size},
           {Proj::Down, hidden_size, intermediate_size}}};
}

int64_t LlamaConfig::projection_params_per_layer() const {
  int64_t n = 0;
  for (const ProjShape& p : projections()) n += p.out * p.in;
  return n;
}

LlamaConfig LlamaConfig::from_json_text(const std::string& text, const std::string& source) {
  const json j = parse_json(text, source);
  if (!j.is_object()) throw Error(cat(source, ": not a JSON object"));
  const JsonFields f(j, source);

  if (const std::string act = f.string("hidden_act", "silu"); act != "silu")
    f.fail("hidden_act", cat("is ", brief(act), "; only silu is supported"));

  LlamaConfig c;
  read_family(f, c);  // first: an unsupported model_type is named before any field it lacks
  if (f.has("architectures")) {
    const json& a = f.at("architectures");
    if (!a.is_array() || (!a.empty() && !a[0].is_string()))
      f.fail("architectures", "must be a list of strings");
    if (!a.empty()) c.architecture = a[0].get<std::string>();
  }
  c.hidden_size = f.positive("hidden_size", kMaxHidden);
  c.intermediate_size = f.positive("intermediate_size", kMaxIntermediate);
  c.num_layers = f.positive("num_hidden_layers", kMaxLayers);
  c.num_heads = f.positive("num_attention_heads", kMaxHeads);
  c.num_kv_heads = f.positive_or("num_key_value_heads", c.num_heads, kMaxHeads);
  c.vocab_size = f.positive("vocab_size", kMaxVocab);
  c.max_position_embeddings =
      f.positive_or("max_position_embeddings", c.max_position_embeddings, kMaxPositions);
  // A prediction needs a token and the one after it: below 2, perplexity, training and
  // generation have nothing to compute (evaluate --task ppl failed an internal check on 1).
  if (c.max_position_embeddings < 2)
    f.fail("max_position_embeddings", cat("(", c.max_position_embeddings, ") must be at least 2"));
  c.rms_norm_eps = f.positive_number("rms_norm_eps", c.rms_norm_eps);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  if (const auto bos = f.id_list("bos_token_id"); !bos.empty()) {
    if (bos.size() != 1) f.fail("bos_token_id", "must be a single token id");
    c.bos_token_id = bos[0];
  }
  c.eos_token_ids = f.id_list("eos_token_id");
  c.torch_dtype = f.has("dtype") ? f.string("dtype", "") : f.string("torch_dtype", "");
  c.quantization = parse_fp8_checkpoint(j, source);

  if (f.has("head_dim")) {
    c.head_dim = f.positive("head_dim", kMaxHidden);
  } else {
    if (c.hidden_size % c.num_heads != 0)
      f.fail("num_attention_heads", cat("(", c.num_heads, ") does not divide hidden_size (",
                                        c.hidden_size, ") and head_dim is not given"));
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) f.fail("head_dim", cat("(", c.head_dim, ") must be even for RoPE"));
  if (c.num_heads % c.num_kv_heads != 0)
    f.fail("num_key_value_heads",
           cat("(", c.num_kv_heads, ") does not divide num_attention_heads (", c.num_heads, ")"));

  if (f.has("rope_parameters")) {  // transformers 5
    const JsonFields rp = f.object("rope_parameters");
    c.rope_theta = rp.positive_number("rope_theta", f.positive_number("rope_theta", c.rope_theta));
    c.rope_scaling = parse_rope_scaling(rp);
  } else {
    c.rope_theta = f.positive_number("rope_theta", c.rope_theta);
    if (f.has("rope_scaling")) c.rope_scaling = parse_rope_scaling(f.object("rope_scaling"));
  }
  return c;
}

LlamaConfig load_llama_config(const std::filesystem::path& path) {
  const auto file = std::filesystem::is_directory(path) ? path / "config.json" : path;
  return LlamaConfig::from_json_text(read_json_text(file), file.string());
}

}  // namespace loft::llama
