// LoRA adapters in PEFT's on-disk layout, so PEFT, transformers and vLLM load what loft writes and
// loft loads what PEFT writes: adapter_model.safetensors with names
// "base_model.model.<module>.lora_A.weight" / "...lora_B.weight" ([r, in] / [out, r]) and
// adapter_config.json (peft_type LORA, r, lora_alpha, target_modules, ...). loft adds a "loft"
// object to the config recording the method and what is needed to rebuild the trained model.
#pragma once
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft {

struct PeftAdapter {
  int rank = 0;
  float alpha = 0;
  std::vector<std::string> target_modules;  // "q_proj", ...
  std::string base_model;                   // base_model_name_or_path
  nlohmann::json loft;                      // loft's own record (method, options); may be null
  // Module name ("model.layers.0.self_attn.q_proj") -> {A [r, in], B [out, r]} as F32 on the CPU.
  std::map<std::string, std::pair<Tensor, Tensor>> modules;
};

// Reads DIR/adapter_config.json and DIR/adapter_model.safetensors. Throws Error naming the file
// and field or tensor at fault (missing, wrong type, rank mismatch, A without B, DoRA/bias/other
// PEFT features loft does not implement).
PeftAdapter load_peft_adapter(const std::filesystem::path& dir);
// Writes both files atomically (each file is written to a temp name and renamed).
void save_peft_adapter(const std::filesystem::path& dir, const PeftAdapter& adapter);

}  // namespace loft
