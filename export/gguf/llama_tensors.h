// How llama.cpp's convert_hf_to_gguf.py lays out a Hugging Face Llama-family checkpoint: the GGUF
// architecture (llama for Llama and Mistral, qwen2, qwen3), tensor names, the q/k row permutation
// of the llama architecture (HF's rotate-half rotary layout to llama.cpp's interleaved one; qwen2
// and qwen3 run rotate-half, NEOX in llama.cpp, and are not permuted), the tensor type per output
// type, and Llama 3's rope_freqs factors.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "export/gguf/gguf_types.h"
#include "models/llama/config.h"

namespace loft::gguf {

// The output types of `loft export --format gguf --gguf-type`; F32 for adapters by default.
enum class OutType { F32, F16, BF16, Q8_0 };
std::optional<OutType> out_type_from_name(std::string_view name);  // "f32", "f16", "bf16", "q8_0"
std::string_view out_type_name(OutType t);
FileType file_type_of(OutType t);

// Which heads' rows a tensor's permutation uses.
enum class Permute { None, Q, K };

struct LlamaTensor {
  std::string hf_name;    // e.g. "model.layers.0.self_attn.q_proj.weight"
  std::string gguf_name;  // e.g. "blk.0.attn_q.weight"
  std::vector<int64_t> shape;  // row-major, as in the HF checkpoint
  Permute permute = Permute::None;
};

// llama.cpp's architecture for the checkpoint's family: "llama" (llama, mistral), "qwen2" or
// "qwen3". Throws loft::Error naming what llama.cpp's architecture cannot hold (a bias it has no
// tensor for, Qwen2 without its q/k/v biases).
std::string gguf_architecture(const llama::LlamaConfig& cfg);

// Every tensor of the merged model in GGUF file order: token_embd, then per layer attn_norm,
// attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down, each projection's
// bias after its weight (attn_q.bias, ...) and attn_q_norm, attn_k_norm after attn_output when the
// family has them, then output_norm and output (absent when the embeddings are tied).
std::vector<LlamaTensor> llama_tensors(const llama::LlamaConfig& cfg);

// The GGUF type of a tensor written at `out`: 1-D tensors and *_norm.weight stay F32; Q8_0 falls
// back to F16 when rows (the last HF dim) are not a multiple of 32, as convert_hf_to_gguf.py does.
TensorType tensor_type_for(const std::string& gguf_name, std::span<const int64_t> shape, OutType out);

// convert_hf_to_gguf.py's permute(w, n_head): the `rows` rows of `w` ([rows, cols] row-major) seen
// as (n_head, 2, rows / n_head / 2) and the last two of those axes swapped. Writes into `out`.
void permute_qk_rows(std::span<const float> w, int64_t rows, int64_t cols, int64_t n_head, std::span<float> out);
// The head count the permutation of `p` uses (num_heads for Q, num_kv_heads for K).
int64_t permute_heads(const llama::LlamaConfig& cfg, Permute p);

// rope_freqs.weight for rope_type llama3: per frequency pair, the factor llama.cpp divides the
// base frequency by (1 for high frequencies, `factor` for low ones, smoothed between).
std::vector<float> llama3_rope_factors(const llama::LlamaConfig& cfg);

}  // namespace loft::gguf
