// Loading a Hugging Face Llama folder into a trainable/evaluable model, and moving LoRA adapters
// between a model and PEFT's files.
#pragma once
#include <filesystem>
#include <memory>

#include "engine/peft/method.h"
#include "engine/peft/peft_adapter.h"
#include "models/llama/model.h"

namespace loft::llama {

// config.json + safetensors (single or sharded) -> a model on `device` in its compute dtype (F32
// on the CPU, BF16 on CUDA), every projection built by `factory`.
std::unique_ptr<LlamaModel> load_model(const std::filesystem::path& dir, Device device,
                                       const LinearFactory& factory);

// Method options that rebuild an adapter's shape (rank, alpha, targets) as saved by PEFT.
MethodOptions method_options_for(const PeftAdapter& adapter);
// Copies the adapter's A/B into the model's LoRA projections. Throws Error naming the module when
// the adapter has a module the model lacks, or the model adapts a module the adapter lacks.
void apply_adapter(LlamaModel& model, const PeftAdapter& adapter, const std::filesystem::path& from);
// The model's LoRA A/B (F32, CPU) as a PEFT adapter with the given rank/alpha/targets.
PeftAdapter extract_adapter(LlamaModel& model, const MethodOptions& opt,
                            const std::string& base_model);

}  // namespace loft::llama
