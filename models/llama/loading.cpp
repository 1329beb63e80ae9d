#include "models/llama/loading.h"

#include <ostream>
#include <set>

#include "engine/io/safetensors_checkpoint.h"
#include "engine/peft/method_record.h"
#include "engine/peft/method_spec.h"
#include "engine/peft/method_state.h"
#include "models/llama/weights.h"

namespace loft::llama {

std::unique_ptr<LlamaModel> load_model(const std::filesystem::path& dir, Device device,
                                       const LinearFactory& factory, ShardGather* shard) {
  const LlamaConfig cfg = load_llama_config(dir);
  const DType dtype = device.is_cpu() ? DType::F32 : DType::BF16;
  LlamaWeights w =
      load_llama_weights(SafetensorsCheckpoint::open(dir), cfg, dtype, device, Fp8Load::keep, Projections::as_stored);
  return std::make_unique<LlamaModel>(cfg, std::move(w), factory, shard);
}

MethodOptions method_options_for(const PeftAdapter& a) {
  if (a.method) return *a.method;
  MethodOptions opt;  // the default method: LoRA, as PEFT made it
  opt.lora = {a.rank, a.alpha};
  for (const std::string& t : a.target_modules) opt.targets.merge(parse_lora_targets(peft_target_leaf(t)));
  return opt;
}

namespace {
std::string describe(const PeftAdapter& a, const MethodOptions& m) {
  if (!a.method) return cat(m.method, " (made by PEFT: no loft record)");
  const std::string detail = method_spec(m.method).brief_detail(m);
  return detail.empty() ? m.method : cat(m.method, " (", detail, ")");
}
}  // namespace

MethodOptions method_options_for(PeftAdapter& a, const std::string& requested,
                                 const std::filesystem::path& from, std::ostream& note) {
  MethodOptions opt = method_options_for(a);
  if (requested.empty() || requested == opt.method) return opt;
  method_defaults(requested);  // UsageError naming --method for an unknown name
  note << "note: adapter " << from.string() << " was trained with " << describe(a, opt)
       << "; building it with --method " << requested << " instead (its A/B on that method's backbone)";
  if (!a.method_state.empty())
    note << ", without its " << opt.method << " state (" << a.method_state.size() << " tensors)";
  note << "\n";
  a.method_state.clear();
  opt.method = requested;
  return opt;
}

void apply_adapter(LlamaModel& model, const PeftAdapter& a, const std::filesystem::path& from) {
  const std::string state_file = (from / kMethodStateFile).string();
  const auto state_of = split_method_state(a.method_state, state_file);
  std::set<std::string> in_model;
  for (const auto& [name, lin] : model.linears()) {
    in_model.insert(name);
    auto it = a.modules.find(name);
    if (lin->imports_peft_pair()) {
      if (it == a.modules.end())
        throw Error(cat("adapter ", from.string(), " has no lora_A/lora_B for ", name));
      try {
        lin->import_peft_pair(it->second.first, it->second.second);
      } catch (const Error& e) {
        throw Error(cat("adapter ", from.string(), ": ", e.what()));
      }
    } else if (lin->params().empty()) {
      // A frozen projection may keep state of its store (FrozenWeight::method_state), never A/B.
      if (it != a.modules.end() || (state_of.count(name) && lin->method_state().empty()))
        throw Error(cat("adapter ", from.string(), " has tensors for ", name,
                        ", which this run does not adapt"));
    } else if (!state_of.count(name)) {
      throw Error(cat("adapter ", from.string(), " has no method state for ", name, " in ",
                      kMethodStateFile, ", from which this run's method rebuilds it"));
    }
  }
  for (const auto& [module, ab] : a.modules)
    if (!in_model.count(module))
      throw Error(cat("adapter ", from.string(), ": module ", module, " is not in the model"));
  model.load_method_state(a.method_state, state_file);  // layer by layer where its codes are sharded
}

PeftAdapter extract_adapter(LlamaModel& model, const MethodOptions& opt,
                            const std::string& base_model) {
  PeftAdapter a;
  a.rank = opt.lora.rank;
  a.alpha = opt.lora.alpha;
  a.target_modules.assign(opt.targets.begin(), opt.targets.end());
  a.base_model = base_model;
  a.method = opt;
  for (const auto& [name, lin] : model.linears())
    if (auto pair = lin->peft_pair()) a.modules[name] = std::move(*pair);
  a.method_state = model.method_state();
  return a;
}

}  // namespace loft::llama
