// Writes small FP8 Llama checkpoints for tests, in the layouts loft reads (models/llama/
// fp8_config.h): transformers "fp8" (128x128 or other blocks, weight_scale_inv) and
// compressed-tensors float-quantized per tensor or per channel (weight_scale, input_scale, an
// ignored bf16 lm_head). Codes are random E4M3 bytes (never NaN), scales random positive values;
// embeddings and norms are bf16. Tests compute what the weights should be from the written bytes.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft::test {

enum class Fp8Layout { TransformersBlock, CtTensor, CtChannel };

struct Fp8FolderOptions {
  Fp8Layout layout = Fp8Layout::TransformersBlock;
  // Awkward sizes by default: FFN 200 and hidden 72 leave partial 128x128 blocks at both edges.
  int64_t hidden = 72, ffn = 200, layers = 2, heads = 2, kv_heads = 1, vocab = 64;
  int64_t block_rows = 128, block_cols = 128;  // TransformersBlock
  DType scale_dtype = DType::F32;
  bool scalar_scale = false;  // CtTensor: weight_scale of shape [] instead of [1]
  float scale_lo = 1e-4f, scale_hi = 3e-4f;
  uint8_t max_code = 0x7e;  // largest |code| byte (0x7e = 448); lower keeps amax/448 off the scale
  uint32_t seed = 1;
};

struct Fp8Folder {
  std::map<std::string, Tensor> tensors;  // what model.safetensors holds
  std::string config;                     // config.json's text
  // Rewrites model.safetensors (after a test edits `tensors`) and config.json.
  void write(const std::filesystem::path& dir) const;
};

// Builds and writes the checkpoint into `dir`.
Fp8Folder write_fp8_folder(const std::filesystem::path& dir, const Fp8FolderOptions& o = {});

// decode(code) x the scale of its block, computed independently of loft's dequantizer: codes
// F8_E4M3 [out, in], scales (any float dtype) holding one value per rows x cols block in row-major
// block order, blocks at the edges partial. rows/cols 0 mean the whole dimension.
std::vector<float> fp8_reference_values(const Tensor& codes, const Tensor& scales, int64_t rows,
                                        int64_t cols);

// The names of every projection weight of the folder's model ("model.layers.0.self_attn.q_proj.weight").
std::vector<std::string> fp8_projection_names(int64_t layers);

}  // namespace loft::test
