#include "models/llama/loading.h"

#include "engine/io/safetensors_checkpoint.h"
#include "engine/peft/lora_linear.h"
#include "models/llama/weights.h"

namespace loft::llama {

std::unique_ptr<LlamaModel> load_model(const std::filesystem::path& dir, Device device,
                                       const LinearFactory& factory) {
  const LlamaConfig cfg = load_llama_config(dir);
  const DType dtype = device.is_cpu() ? DType::F32 : DType::BF16;
  LlamaWeights w = load_llama_weights(SafetensorsCheckpoint::open(dir), cfg, dtype, device);
  return std::make_unique<LlamaModel>(cfg, std::move(w), factory);
}

MethodOptions method_options_for(const PeftAdapter& a) {
  MethodOptions opt;
  opt.method = "lora";
  opt.lora = {a.rank, a.alpha};
  for (const std::string& t : a.target_modules) {
    // PEFT allows full module paths or suffixes; loft adapts by projection name.
    const std::string leaf = t.substr(t.rfind('.') == std::string::npos ? 0 : t.rfind('.') + 1);
    opt.targets.merge(parse_lora_targets(leaf));
  }
  return opt;
}

void apply_adapter(LlamaModel& model, const PeftAdapter& a, const std::filesystem::path& from) {
  size_t used = 0;
  for (const auto& [name, lin] : model.linears()) {
    auto* lora = dynamic_cast<LoraLinear*>(lin);
    auto it = a.modules.find(name);
    if (!lora) {
      if (it != a.modules.end())
        throw Error(cat("adapter ", from.string(), " has tensors for ", name,
                        ", which this run does not adapt"));
      continue;
    }
    if (it == a.modules.end())
      throw Error(cat("adapter ", from.string(), " has no lora_A/lora_B for ", name));
    lora->set_adapter(it->second.first, it->second.second);
    ++used;
  }
  if (used != a.modules.size())
    for (const auto& [module, ab] : a.modules) {
      bool found = false;
      for (const auto& [name, lin] : model.linears()) found |= name == module;
      if (!found)
        throw Error(cat("adapter ", from.string(), ": module ", module, " is not in the model"));
    }
}

PeftAdapter extract_adapter(LlamaModel& model, const MethodOptions& opt,
                            const std::string& base_model) {
  PeftAdapter a;
  a.rank = opt.lora.rank;
  a.alpha = opt.lora.alpha;
  a.target_modules.assign(opt.targets.begin(), opt.targets.end());
  a.base_model = base_model;
  a.loft = {{"method", opt.method}};
  for (const auto& [name, lin] : model.linears())
    if (auto pair = lin->peft_pair()) a.modules[name] = std::move(*pair);
  return a;
}

}  // namespace loft::llama
