// Writes a merged Llama model as one llama.cpp GGUF v3 file, streaming: the constructor lays out
// every tensor from the config (names, shapes, types, offsets) and writes the header, metadata and
// vocabulary; add() then takes each Hugging Face-named tensor (fp32 or bf16 on the host, in any
// order, e.g. layer by layer), permutes q/k rows as llama.cpp expects, encodes it and writes it at
// its offset; finish() checks nothing is missing and renames the temp file into place.
// Peak memory: the vocabulary plus about two copies of the largest tensor being added.
//
//   gguf::LlamaWriter w(out_path, cfg, model_dir, gguf::OutType::Q8_0, "my-model");
//   for (each merged tensor) w.add("model.layers.3.self_attn.q_proj.weight", data, {out, in});
//   w.finish();
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "export/gguf/gguf_writer.h"
#include "export/gguf/llama_tensors.h"
#include "models/llama/config.h"

namespace loft::gguf {

class LlamaWriter {
 public:
  // `tokenizer_dir` holds the base model's tokenizer files (and config.json / tokenizer_config.json
  // for special tokens and the chat template); `name` becomes general.name. Throws loft::Error for
  // an unsupported rope scaling or tokenizer, or a config llama.cpp cannot load.
  LlamaWriter(const std::filesystem::path& out, const llama::LlamaConfig& cfg,
              const std::filesystem::path& tokenizer_dir, OutType type, const std::string& name);

  // One tensor by its Hugging Face name ("model.embed_tokens.weight", "lm_head.weight", ...), its
  // row-major shape checked against the config. lm_head.weight of a tied model is accepted and
  // ignored (llama.cpp reuses token_embd); rotary inv_freq buffers are ignored. Throws loft::Error
  // naming the tensor when it is unknown, has the wrong shape, or was already added.
  void add(const std::string& hf_name, std::span<const float> data, std::span<const int64_t> shape);
  void add_bf16(const std::string& hf_name, std::span<const uint16_t> data, std::span<const int64_t> shape);
  // Throws naming the first tensor never added; else the file appears at `out`.
  void finish();

  // The Hugging Face names add() still expects.
  std::vector<std::string> missing() const;
  const std::vector<TensorInfo>& tensors() const { return writer_.tensors(); }

 private:
  llama::LlamaConfig cfg_;
  Writer writer_;
  std::vector<LlamaTensor> plan_;   // in file order after rope_freqs (when present)
  std::vector<bool> added_;
};

// Writes tensor `index` of `w` from row-major values of `shape`, rows permuted for `heads` heads
// when heads > 0 (q/k), encoded as the type it was declared with.
void write_values(Writer& w, size_t index, std::span<const float> data, std::span<const int64_t> shape, int64_t heads);
std::string shape_text(std::span<const int64_t> shape);  // "[64, 8]"

// The llama.* hyperparameter keys for `cfg` (and general.file_type for `type`).
void set_llama_metadata(Writer& w, const llama::LlamaConfig& cfg, OutType type);

}  // namespace loft::gguf
