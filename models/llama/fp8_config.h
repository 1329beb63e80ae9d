// How an FP8 checkpoint stores its weights, from config.json's quantization_config. Each
// quant_method loft reads has one parser, registered in fp8_config.cpp:
//  - "fp8" (transformers' FineGrainedFP8): `weight` F8_E4M3 and `weight_scale_inv` (F32) per
//    weight_block_size block, [128, 128] as transformers writes it;
//  - "compressed-tensors" with format float-quantized or naive-quantized and 8-bit float weights:
//    `weight` F8_E4M3 and `weight_scale` per tensor ([1] or []) or per output channel ([out, 1]);
//    `input_scale` (static activation quantization) is accepted and not used.
// Anything else (another quant_method, int or packed formats, activation-only groups, other
// strategies) is an Error naming config.json and the field, so nothing loads misread.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loft::llama {

struct Fp8Checkpoint {
  enum class Granularity { Tensor, Channel, Block };

  std::string quant_method;  // "fp8" or "compressed-tensors"
  std::string format;        // compressed-tensors' format ("float-quantized"); "" for "fp8"
  Granularity granularity = Granularity::Block;
  int64_t block_rows = 0, block_cols = 0;  // Block only
  std::string scale_name;                  // replaces "weight": "weight_scale_inv", "weight_scale"
  std::string zero_point_name;             // "weight_zero_point" (compressed-tensors), else ""
  std::vector<std::string> not_quantized;  // `ignore` / `modules_to_not_convert`, as listed

  // The block one scale covers in a weight [out, in].
  std::pair<int64_t, int64_t> block_for(int64_t out, int64_t in) const;
  // "fp8 e4m3, block 128x128 (transformers fp8)", "fp8 e4m3, per-channel (compressed-tensors
  // float-quantized)".
  std::string describe() const;
  // {method, format, weights: "e4m3", granularity, block, scale_tensor, not_quantized, description}.
  nlohmann::json to_json() const;
};

// nullopt when `config` (config.json's object) has no quantization_config; the parsed scheme
// otherwise. Throws Error naming `source` and the field when it is not one loft reads.
std::optional<Fp8Checkpoint> parse_fp8_checkpoint(const nlohmann::json& config,
                                                  const std::string& source);

// The scheme `loft export --format fp8 --fp8-layout L` writes: "channel" (compressed-tensors
// float-quantized, per-output-channel weight scales, the FP8_DYNAMIC preset), "tensor"
// (compressed-tensors, one scale per weight), "block" (transformers fp8, 128x128 blocks). lm_head
// stays unquantized (not_quantized = {"lm_head"}). UsageError naming --fp8-layout otherwise.
Fp8Checkpoint fp8_export_scheme(const std::string& layout);

// config.json's quantization_config for a scheme, spelled as each format's own writer spells it
// (so parse_fp8_checkpoint reads it back to the same scheme):
//  - "fp8": transformers' FineGrainedFP8Config fields (activation_scheme dynamic, weight_block_size,
//    scale_fmt float, modules_to_not_convert);
//  - "compressed-tensors": one group "group_0" targeting Linear, weights 8-bit float symmetric per
//    channel or tensor (static, minmax observer), input activations 8-bit float dynamic per token
//    (FP8_DYNAMIC), format float-quantized, quantization_status compressed, ignore, no kv cache.
nlohmann::json quantization_config_json(const Fp8Checkpoint& scheme);

}  // namespace loft::llama
