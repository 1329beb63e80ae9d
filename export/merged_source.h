// The trained model's weights, produced one tensor at a time in Hugging Face names, for every
// export format (safetensors fp8/bf16 here, GGUF elsewhere) to consume without ever holding the
// whole model: peak memory is about one projection in fp32.
//
//   MergedSource src(model_dir, adapter_dir, "", std::cerr);   // adapter_dir "": the base itself
//   for (size_t i = 0; i < src.tensors().size(); ++i) {          // listing first (headers need it)
//     MergedTensor t = src.read(i);                              // then each tensor's values
//     ... t.info.name, t.info.shape, t.value (host), t.fp8 (FALQON's own codes, when set) ...
//   }
//
// Order (llama::weight_slots'): model.embed_tokens.weight, model.norm.weight, lm_head.weight
// (absent when tie_word_embeddings); then per layer i: input_layernorm, post_attention_layernorm,
// q, k, v, o, gate, up, down (model.layers.i.self_attn.q_proj.weight, ...), then a family's biases
// and q/k norms, as stored (model.layers.i.self_attn.q_proj.bias, ...). MergedTensorInfo::layer
// says which layer a tensor belongs to (-1 for the three outside the layers), so a consumer can
// group by layer.
//
// What each projection holds (docs/methods.md; the adapter's recorded method, or --method):
//  - no adapter: the base weight (an FP8 base: code x scale in fp32, exactly);
//  - lora, halo (dense backbone): W + (α/r)·B·A in fp32 from the base's exact values (HALO's
//    rotation and low-precision codes are how its GEMMs ran, undone: the original W);
//  - qlora: deq(NF4(W)) + (α/r)·B·A, the NF4 backbone it trained on; its frozen projections too;
//  - halo --backbone nf4: deq(NF4(W·H))·Hᵀ (the rotated NF4 backbone, un-rotated) + (α/r)·B·A;
//  - falqon targets: the trained E4M3 codes under the one per-tensor scale (`fp8`), and their exact
//    decode in `value`; falqon's frozen projections: W.
// Embeddings, norms and lm_head pass through as stored (F32, BF16 or F16; an FP8 one decoded to
// F32). Every error names the folder/file and tensor.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "engine/io/safetensors_checkpoint.h"
#include "engine/peft/method.h"
#include "engine/peft/peft_adapter.h"
#include "engine/quant/scaled_fp8.h"
#include "models/llama/config.h"

namespace loft::exporter {

enum class TensorRole { Embedding, Norm, Bias, Projection, LmHead };

struct MergedTensorInfo {
  std::string name;  // Hugging Face name, "model.layers.3.mlp.down_proj.weight"
  Shape shape;       // [out, in] for projections, [vocab, hidden], [hidden]
  TensorRole role = TensorRole::Projection;
  int64_t layer = -1;                  // decoder layer, -1 outside the layers
  llama::Proj proj = llama::Proj::Q;   // projections only
};

struct MergedTensor {
  MergedTensorInfo info;
  // Host tensor of info.shape: F32 for projections; embeddings, norms and lm_head as stored
  // (F32, BF16 or F16, possibly a read-only view of the checkpoint's mapping).
  Tensor value;
  // FALQON-trained projections: the E4M3 codes and the one scale they trained with (one block
  // spanning the matrix), bit for bit; `value` is their decode. Undefined otherwise.
  quant::ScaledFp8 fp8;
};

class MergedSource {
 public:
  // Opens the base (config.json + safetensors) and, unless adapter_dir is empty, the adapter with
  // its recorded method (`method` overrides it as `loft evaluate --method` does, one "note:" line
  // to `note`). Nothing heavy happens here: tensors are computed by read().
  MergedSource(const std::filesystem::path& model_dir, const std::filesystem::path& adapter_dir,
               const std::string& method, std::ostream& note);

  const llama::LlamaConfig& config() const { return cfg_; }
  const std::filesystem::path& model_dir() const { return model_dir_; }
  // The method the model is rebuilt with; nullopt for a base export.
  const std::optional<MethodOptions>& method() const { return method_; }
  const std::optional<PeftAdapter>& adapter() const { return adapter_; }
  // What is exported, for the summary: "lora adapter DIR" or "base model".
  std::string describe() const;
  // Every tensor of the exported model, in export order, without computing anything.
  const std::vector<MergedTensorInfo>& tensors() const { return infos_; }

  // Computes tensor `index` of tensors(); the base's mapped pages it read are released after.
  MergedTensor read(size_t index) const;
  // The base projection W as exact fp32 [out, in] (FP8 bases decoded), for formats that compare
  // the trained model with its base (the FALQON PEFT fit).
  Tensor base_weight(const MergedTensorInfo& info) const;

 private:
  Tensor decoded_f32(const std::string& name) const;
  Tensor merged_projection(const MergedTensorInfo& info, quant::ScaledFp8* fp8) const;

  std::filesystem::path model_dir_, adapter_dir_;
  llama::LlamaConfig cfg_;
  SafetensorsCheckpoint ckpt_;
  std::optional<PeftAdapter> adapter_;
  std::optional<MethodOptions> method_;
  std::vector<MergedTensorInfo> infos_;
};

}  // namespace loft::exporter
