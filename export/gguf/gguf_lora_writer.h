// Writes a LoRA adapter as llama.cpp's convert_lora_to_gguf.py does: general.type "adapter",
// adapter.type "lora", adapter.lora.alpha (float32); per adapted weight W (GGUF name N, e.g.
// blk.0.attn_q.weight) the tensors N.lora_a = A ([rank, in] row-major, GGUF dims [in, rank]) and
// N.lora_b = B ([out, rank], GGUF dims [rank, out]), B's rows permuted for q/k like the base
// weight's. llama.cpp applies W + (alpha / rank) * B A, rank read from lora_a. Streaming as
// LlamaWriter: targets are declared up front, pairs added in any order.
//
//   gguf::LoraWriter w(out, cfg, {{"model.layers.0.self_attn.q_proj.weight", 16}, ...}, 32.0f);
//   w.add("model.layers.0.self_attn.q_proj.weight", A, {16, 64}, B, {64, 16});
//   w.finish();
#pragma once
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "export/gguf/gguf_writer.h"
#include "export/gguf/llama_tensors.h"
#include "models/llama/config.h"

namespace loft::gguf {

struct LoraTarget {
  std::string hf_name;  // the adapted weight, e.g. "model.layers.0.mlp.down_proj.weight"
  int64_t rank = 0;
};

class LoraWriter {
 public:
  // Throws loft::Error naming a target that is not a decoder-layer projection of `cfg`, repeats,
  // or has a rank below 1. `alpha` is PEFT's lora_alpha (for rsLoRA pass alpha * sqrt(rank) so
  // that alpha / rank is the scale).
  LoraWriter(const std::filesystem::path& out, const llama::LlamaConfig& cfg, std::vector<LoraTarget> targets,
             float alpha, OutType type = OutType::F32, const std::string& name = "");

  // A and B (row-major fp32) of one declared target; shapes checked against its rank and weight.
  void add(const std::string& hf_name, std::span<const float> a, std::span<const int64_t> a_shape,
           std::span<const float> b, std::span<const int64_t> b_shape);
  // Throws naming the first target never added; else the file appears at `out`.
  void finish();

  const std::vector<TensorInfo>& tensors() const { return writer_.tensors(); }

 private:
  struct Entry {
    LlamaTensor weight;
    int64_t rank;
    bool added = false;
  };
  llama::LlamaConfig cfg_;
  Writer writer_;
  std::vector<Entry> entries_;
};

}  // namespace loft::gguf
