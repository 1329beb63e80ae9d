#include "export/gguf/gguf_lora_writer.h"

#include <algorithm>

#include "export/gguf/gguf_llama_writer.h"

namespace loft::gguf {

LoraWriter::LoraWriter(const std::filesystem::path& out, const llama::LlamaConfig& cfg, std::vector<LoraTarget> targets,
                       float alpha, OutType type, const std::string& name)
    : cfg_(cfg), writer_(out) {
  const std::vector<LlamaTensor> weights = llama_tensors(cfg);
  for (const LoraTarget& t : targets) {
    const auto w = std::find_if(weights.begin(), weights.end(), [&](const LlamaTensor& x) { return x.hf_name == t.hf_name; });
    if (w == weights.end() || w->shape.size() != 2 || !w->hf_name.starts_with("model.layers."))
      throw Error(cat("GGUF LoRA export: '", t.hf_name, "' is not a decoder-layer projection weight of this model"));
    if (t.rank < 1) throw Error(cat("GGUF LoRA export: '", t.hf_name, "' has rank ", t.rank));
    for (const Entry& e : entries_)
      if (e.weight.hf_name == t.hf_name) throw Error(cat("GGUF LoRA export: '", t.hf_name, "' is listed twice"));
    entries_.push_back({*w, t.rank});
  }
  writer_.set("general.architecture", Value::string(gguf_architecture(cfg)));
  writer_.set("general.type", Value::string("adapter"));
  if (!name.empty()) writer_.set("general.name", Value::string(name));
  writer_.set("adapter.type", Value::string("lora"));
  writer_.set("adapter.lora.alpha", Value::of<float>(alpha));
  writer_.set("general.quantization_version", Value::of<uint32_t>(kQuantizationVersion));
  for (const Entry& e : entries_) {
    const std::vector<int64_t> a{e.rank, e.weight.shape[1]}, b{e.weight.shape[0], e.rank};
    const std::string na = e.weight.gguf_name + ".lora_a", nb = e.weight.gguf_name + ".lora_b";
    writer_.add_tensor(na, a, tensor_type_for(na, a, type));
    writer_.add_tensor(nb, b, tensor_type_for(nb, b, type));
  }
  writer_.begin();
}

void LoraWriter::add(const std::string& hf_name, std::span<const float> a, std::span<const int64_t> a_shape,
                     std::span<const float> b, std::span<const int64_t> b_shape) {
  const auto e = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& x) { return x.weight.hf_name == hf_name; });
  if (e == entries_.end()) throw Error(cat("GGUF LoRA export: '", hf_name, "' was not declared as a target"));
  if (e->added) throw Error(cat("GGUF LoRA export: '", hf_name, "' added twice"));
  const std::vector<int64_t> want_a{e->rank, e->weight.shape[1]}, want_b{e->weight.shape[0], e->rank};
  const auto check = [&](const char* which, std::span<const int64_t> got, const std::vector<int64_t>& want) {
    if (!std::equal(got.begin(), got.end(), want.begin(), want.end()))
      throw Error(cat("GGUF LoRA export: ", which, " of '", hf_name, "' has shape ", shape_text(got), ", expected ", shape_text(want)));
  };
  check("lora_A", a_shape, want_a);
  check("lora_B", b_shape, want_b);
  const int64_t heads = e->weight.permute == Permute::None ? 0 : permute_heads(cfg_, e->weight.permute);
  write_values(writer_, writer_.tensor_index(e->weight.gguf_name + ".lora_a"), a, want_a, 0);
  write_values(writer_, writer_.tensor_index(e->weight.gguf_name + ".lora_b"), b, want_b, heads);
  e->added = true;
}

void LoraWriter::finish() {
  for (const Entry& e : entries_)
    if (!e.added) throw Error(cat("GGUF LoRA export: '", e.weight.hf_name, "' was never added"));
  writer_.finish();
}

}  // namespace loft::gguf
