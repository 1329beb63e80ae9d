// The tensors of a Llama checkpoint, mapped from Hugging Face names and converted on load to one
// dtype (F32 or BF16) on one device. Linear weights keep nn.Linear's [out, in] layout.
#pragma once
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "engine/io/safetensors_checkpoint.h"
#include "engine/quant/scaled_fp8.h"
#include "engine/tensor/tensor.h"
#include "models/llama/config.h"

namespace loft::llama {

struct LlamaLayerWeights {
  Tensor attn_norm;  // input_layernorm [hidden]
  Tensor ffn_norm;   // post_attention_layernorm [hidden]
  Tensor q, k, v, o, gate, up, down;
  // The family's extra frozen tensors (LlamaConfig): a projection's bias [out] by Proj, undefined
  // where it has none; Qwen3's per-head q_norm / k_norm [head_dim], undefined without qk_norm.
  std::array<Tensor, kNumProj> bias;
  Tensor q_norm, k_norm;
  // A projection an FP8 checkpoint stores as codes + scales, kept so (its Tensor above undefined)
  // when loaded with Fp8Load::keep, for the method's factory to take as it needs; by Proj.
  std::array<quant::ScaledFp8, kNumProj> fp8;
  // A projection made only when LlamaModel builds its layer (its Tensor undefined until then):
  // bench's random weights, so that no more than one dense projection exists at a time.
  std::array<std::function<Tensor()>, kNumProj> draw;

  Tensor& proj(Proj p);
  const Tensor& proj(Proj p) const;
};

struct LlamaWeights {
  Tensor embed;       // [vocab, hidden]
  Tensor final_norm;  // [hidden]
  Tensor lm_head;     // [vocab, hidden]; undefined when tie_word_embeddings
  std::vector<LlamaLayerWeights> layers;

  // The classifier: lm_head, or the embedding when tied.
  const Tensor& output_weight() const { return lm_head.defined() ? lm_head : embed; }
};

// Where a model on `device` keeps its input embedding table: in host memory when training on a
// GPU, since a batch needs only its own rows (LlamaModel gathers them there and uploads [T, hidden]
// once per micro-batch), unless the table is also the lm_head (tie_word_embeddings), which every
// step multiplies by in full and so stays on the GPU. On the CPU host memory is the device.
bool embedding_in_host_memory(const LlamaConfig& cfg, Device device);

// "model.layers.3.self_attn.q_proj.weight", ...
std::string hf_proj_name(int64_t layer, Proj p);
// "model.layers.3.self_attn.q_proj.bias", ...
std::string hf_bias_name(int64_t layer, Proj p);

// Every tensor a model of `cfg` holds: its Hugging Face name, shape and where it goes in `w`
// (whose layers are resized to cfg.num_layers). The loader and random initialisation fill these.
// Per layer: the two norms, the 7 projections, then the family's biases (Proj order) and q_norm,
// k_norm.
struct WeightSlot {
  std::string name;
  Shape shape;
  Tensor* dst;
  quant::ScaledFp8* fp8 = nullptr;  // projections: where Fp8Load::keep puts an FP8 weight
  std::function<Tensor()>* draw = nullptr;  // projections: LlamaLayerWeights::draw
};
std::vector<WeightSlot> weight_slots(const LlamaConfig& cfg, LlamaWeights& w);

// What becomes of the weights an FP8 checkpoint (cfg.quantization) stores as codes + scales:
// decoded to `dtype` like every other tensor, or, for the 7 projections, kept as stored
// (LlamaLayerWeights::fp8) so each method decodes or takes the codes one projection at a time.
enum class Fp8Load { dequantize, keep };

// Checks every expected tensor first (a missing one, a wrong shape or a non-float dtype is an
// Error naming the tensor, with expected vs found; an FP8 weight's scale as read_fp8_weight
// checks it; a bias or q/k norm the config does not give the model, which would be dropped, is
// an Error naming the tensor and config.json's model_type), then loads them. Tensors the model does not use (rotary_emb.inv_freq, a tied
// lm_head.weight, scales of other modules, input scales) are ignored. `dtype` must be F32 or BF16;
// stored F32/F16/BF16/F8 values are converted on the host (round to nearest even); scaled FP8
// weights are decode(code) x scale in fp32, then rounded once to `dtype`. The embedding table goes
// to host memory where embedding_in_host_memory says so.
// Projections::as_stored leaves the 7 projections as views of the mapped file in its dtype, for
// LlamaModel to convert and upload one at a time as each method re-encodes it: the device never
// holds the whole dense model (a 13B model's 26 GB of bf16 on a 24 GB card).
enum class Projections { converted, as_stored };
LlamaWeights load_llama_weights(const SafetensorsCheckpoint& ckpt, const LlamaConfig& cfg,
                                DType dtype, Device device, Fp8Load fp8 = Fp8Load::dequantize,
                                Projections projections = Projections::converted);

// `src` (a CPU view of a file, or any tensor) as `dtype` on `device`: stored F32/F16/BF16/F8
// values converted on the host (round to nearest even), then copied.
Tensor convert_weight(const Tensor& src, DType dtype, Device device);

}  // namespace loft::llama
