#include "export/gguf/gguf_llama_writer.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "engine/tensor/dtype.h"
#include "export/gguf/gguf_encode.h"
#include "export/gguf/gguf_vocab.h"

namespace loft::gguf {

namespace {

bool same_shape(std::span<const int64_t> a, const std::vector<int64_t>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

}  // namespace

std::string shape_text(std::span<const int64_t> s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += cat(i ? ", " : "", s[i]);
  return t + "]";
}

void write_values(Writer& w, size_t index, std::span<const float> data, std::span<const int64_t> shape, int64_t heads) {
  const TensorInfo& info = w.tensors()[index];
  const int64_t cols = shape.back(), n = std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<>());
  if (int64_t(data.size()) != n)
    throw Error(cat("GGUF export: tensor '", info.name, "' has ", data.size(), " values for shape ", shape_text(shape)));
  std::vector<float> permuted;
  if (heads > 0) {  // a q/k bias [out] permutes as out rows of one value
    const int64_t row = shape.size() == 1 ? 1 : cols;
    permuted.resize(data.size());
    permute_qk_rows(data, n / row, row, heads, permuted);
    data = permuted;
  }
  const std::vector<uint8_t> bytes = encode_tensor(info.type, data, cols);
  w.write_tensor(index, bytes.data(), bytes.size());
}

void set_llama_metadata(Writer& w, const llama::LlamaConfig& cfg, OutType type) {
  const std::string arch = gguf_architecture(cfg);  // the keys' prefix: llama.*, qwen2.*, qwen3.*
  const auto key = [&](const char* k) { return arch + "." + k; };
  const auto u32 = [&](const char* k, int64_t v) { w.set(key(k), Value::of<uint32_t>(uint32_t(v))); };
  u32("vocab_size", cfg.vocab_size);
  u32("context_length", cfg.max_position_embeddings);
  u32("embedding_length", cfg.hidden_size);
  u32("block_count", cfg.num_layers);
  u32("feed_forward_length", cfg.intermediate_size);
  u32("rope.dimension_count", cfg.head_dim);
  u32("attention.head_count", cfg.num_heads);
  u32("attention.head_count_kv", cfg.num_kv_heads);
  u32("attention.key_length", cfg.head_dim);
  u32("attention.value_length", cfg.head_dim);
  w.set(key("rope.freq_base"), Value::of<float>(float(cfg.rope_theta)));
  w.set(key("attention.layer_norm_rms_epsilon"), Value::of<float>(float(cfg.rms_norm_eps)));
  const std::string& rope = cfg.rope_scaling.type;
  if (rope == "linear") {
    w.set(key("rope.scaling.type"), Value::string("linear"));
    w.set(key("rope.scaling.factor"), Value::of<float>(float(cfg.rope_scaling.factor)));
  } else if (rope != "default" && rope != "llama3") {  // llama3 is the rope_freqs tensor
    throw Error(cat("GGUF export does not support rope scaling '", rope, "'"));
  }
  w.set("general.file_type", Value::of<uint32_t>(uint32_t(file_type_of(type))));
}

LlamaWriter::LlamaWriter(const std::filesystem::path& out, const llama::LlamaConfig& cfg,
                         const std::filesystem::path& tokenizer_dir, OutType type, const std::string& name)
    : cfg_(cfg), writer_(out), plan_(llama_tensors(cfg)) {
  if (cfg.head_dim % 2 != 0) throw Error(cat("GGUF export needs an even head_dim, got ", cfg.head_dim));
  writer_.set("general.architecture", Value::string(gguf_architecture(cfg)));
  writer_.set("general.type", Value::string("model"));
  if (!name.empty()) writer_.set("general.name", Value::string(name));
  set_llama_metadata(writer_, cfg, type);
  writer_.set("general.quantization_version", Value::of<uint32_t>(kQuantizationVersion));
  set_vocab_metadata(writer_, read_vocab(tokenizer_dir, cfg.vocab_size));

  std::vector<float> rope_factors;
  if (cfg.rope_scaling.type == "llama3") {
    rope_factors = llama3_rope_factors(cfg);
    const int64_t n = int64_t(rope_factors.size());
    writer_.add_tensor("rope_freqs.weight", std::span<const int64_t>(&n, 1), TensorType::F32);
  }
  for (const LlamaTensor& t : plan_) writer_.add_tensor(t.gguf_name, t.shape, tensor_type_for(t.gguf_name, t.shape, type));
  writer_.begin();
  if (!rope_factors.empty()) writer_.write_tensor(0, rope_factors.data(), rope_factors.size() * sizeof(float));
  added_.assign(plan_.size(), false);
}

void LlamaWriter::add(const std::string& hf_name, std::span<const float> data, std::span<const int64_t> shape) {
  if (hf_name.ends_with("rotary_emb.inv_freq")) return;
  if (hf_name == "lm_head.weight" && cfg_.tie_word_embeddings) return;
  size_t i = 0;
  while (i < plan_.size() && plan_[i].hf_name != hf_name) ++i;
  if (i == plan_.size()) throw Error(cat("GGUF export: tensor '", hf_name, "' is not part of this ", gguf_architecture(cfg_), " model"));
  const LlamaTensor& t = plan_[i];
  if (added_[i]) throw Error(cat("GGUF export: tensor '", hf_name, "' added twice"));
  if (!same_shape(shape, t.shape))
    throw Error(cat("GGUF export: tensor '", hf_name, "' has shape ", shape_text(shape), ", the config says ", shape_text(t.shape)));
  write_values(writer_, writer_.tensor_index(t.gguf_name), data, t.shape,
               t.permute == Permute::None ? 0 : permute_heads(cfg_, t.permute));
  added_[i] = true;
}

void LlamaWriter::add_bf16(const std::string& hf_name, std::span<const uint16_t> data, std::span<const int64_t> shape) {
  std::vector<float> f(data.size());
  for (size_t i = 0; i < data.size(); ++i) f[i] = bf16_to_f32(data[i]);
  add(hf_name, f, shape);
}

std::vector<std::string> LlamaWriter::missing() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < plan_.size(); ++i)
    if (!added_[i]) out.push_back(plan_[i].hf_name);
  return out;
}

void LlamaWriter::finish() {
  const std::vector<std::string> left = missing();
  if (!left.empty())
    throw Error(cat("GGUF export: tensor '", left.front(), "' was never added (", left.size(), " missing)"));
  writer_.finish();
}

}  // namespace loft::gguf
