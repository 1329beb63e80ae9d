// LoRA adapters in PEFT's on-disk layout, so PEFT, transformers and vLLM load what loft writes and
// loft loads what PEFT writes: adapter_model.safetensors with names
// "base_model.model.<module>.lora_A.weight" / "...lora_B.weight" ([r, in] / [out, r]) and
// adapter_config.json (peft_type LORA, r, lora_alpha, target_modules, ...). loft adds a "loft"
// object to the config recording the method and its options (engine/peft/method_record.h), and,
// when the method keeps state beyond A/B, loft_state.safetensors (engine/peft/method_state.h).
#pragma once
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/peft/method.h"

namespace loft {

struct PeftAdapter {
  int rank = 0;
  float alpha = 0;
  std::vector<std::string> target_modules;  // "q_proj", ...
  std::string base_model;                   // base_model_name_or_path
  // loft's record of the method that trained the adapter; nullopt for adapters PEFT made.
  std::optional<MethodOptions> method;
  // "<module>.<key>" -> tensor (host): the method's state (loft_state.safetensors); usually empty.
  std::map<std::string, Tensor> method_state;
  // Module name ("model.layers.0.self_attn.q_proj") -> {A [r, in], B [out, r]} as F32 on the CPU.
  std::map<std::string, std::pair<Tensor, Tensor>> modules;
};

// Reads DIR/adapter_config.json, DIR/adapter_model.safetensors and, if present,
// DIR/loft_state.safetensors. Throws Error naming the file and field or tensor at fault (missing,
// wrong type, rank mismatch, A without B, DoRA/bias/other PEFT features loft does not implement,
// a loft record that contradicts r / lora_alpha / target_modules).
PeftAdapter load_peft_adapter(const std::filesystem::path& dir);
// adapter_config.json's part alone (no tensors): the fuzz target's entry point.
PeftAdapter peft_adapter_config_from(const nlohmann::json& config, const std::filesystem::path& file);
// Writes the files atomically (each is written to a temp name and renamed); a stale
// loft_state.safetensors is removed when the adapter has no method state.
void save_peft_adapter(const std::filesystem::path& dir, const PeftAdapter& adapter);

// The projection a PEFT target_modules entry names: "q_proj" for "model.layers.0.self_attn.q_proj"
// (PEFT allows full module paths or suffixes; loft adapts by projection name).
std::string peft_target_leaf(const std::string& target_module);

}  // namespace loft
