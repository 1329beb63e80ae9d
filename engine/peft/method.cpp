#include "engine/peft/method.h"

#include <sstream>

#include "engine/peft/frozen_linear.h"
#include "engine/peft/nf4_weight.h"

namespace loft {

const std::vector<std::string>& method_names() {
  static const std::vector<std::string> names{"lora", "qlora", "falqon", "halo"};
  return names;
}

MethodDefaults method_defaults(const std::string& method) {
  // METHODS.md: LoRA/QLoRA follow the QLoRA recipe; FALQON and HALO their reference scripts.
  if (method == "lora" || method == "qlora") return {64, 16.0f, 2e-4, "constant", 0, 0.3, 16};
  if (method == "falqon") return {64, 16.0f, 2e-3, "constant", 0, 3.0, 16};
  if (method == "halo") return {16, 8.0f, 3e-4, "linear", 20, 0.0, 32};
  throw UsageError(cat("--method: '", method, "' is not one of lora, qlora, falqon, halo"));
}

const std::vector<std::string>& all_lora_targets() {
  static const std::vector<std::string> t{"q_proj", "k_proj",  "v_proj",  "o_proj",
                                          "gate_proj", "up_proj", "down_proj"};
  return t;
}

std::set<std::string> parse_lora_targets(const std::string& spec) {
  if (spec == "all") return {all_lora_targets().begin(), all_lora_targets().end()};
  std::set<std::string> out;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    bool known = false;
    for (const auto& t : all_lora_targets()) known |= t == item;
    if (!known)
      throw UsageError(cat("--lora-targets: '", item, "' is not one of q_proj, k_proj, v_proj, ",
                           "o_proj, gate_proj, up_proj, down_proj (or 'all')"));
    out.insert(item);
  }
  if (out.empty()) throw UsageError("--lora-targets: no projection named");
  return out;
}

void apply_method_invariants(MethodOptions& opt) {
  if (opt.method == "falqon") opt.lora.alpha = float(opt.lora.rank);
}

quant::LowpFormat parse_halo_format(const std::string& name) {
  if (name == "fp8") return quant::LowpFormat::E4M3;
  if (name == "int8") return quant::LowpFormat::INT8;
  throw UsageError(cat("--halo-format: '", name, "' is not fp8 or int8"));
}

LinearFactory make_linear_factory(const MethodOptions& opt, std::mt19937_64& rng) {
  method_defaults(opt.method);  // UsageError for an unknown name
  if (opt.method == "falqon" && opt.falqon.topk < 0)
    throw UsageError(cat("--falqon-topk ", opt.falqon.topk, " must be >= 0 (0 = the rank)"));
  if (opt.method == "halo" && (opt.halo.level < 0 || opt.halo.level > 2))
    throw UsageError(cat("--halo-level ", opt.halo.level, " is not one of 0, 1, 2"));
  // An NF4 backbone under HALO's codes is HALO's option; QLoRA is NF4 by definition.
  if (opt.halo.backbone == HaloBackbone::Nf4 && opt.method != "halo")
    throw UsageError(cat("--backbone nf4 applies to --method halo only (got --method ", opt.method,
                         opt.method == "qlora" ? "; qlora already stores its backbone NF4" : "",
                         ")"));
  // Every frozen projection, adapted or not, is stored the method's way.
  // FALQON and HALO take the WeightSource itself (an FP8 checkpoint's codes or exact values);
  // the others store the weight dense in the compute dtype.
  return [opt, &rng](const std::string& name, const std::string& target,
                     WeightSource weight) -> std::unique_ptr<AdaptedLinear> {
    if (opt.method == "falqon") {
      if (!opt.targets.count(target)) return std::make_unique<FrozenLinear>(weight.dense());
      return std::make_unique<FalqonLinear>(name, weight, opt.lora.rank, opt.falqon);
    }
    auto frozen = opt.method == "qlora"  ? nf4_weight(weight.dense())
                  : opt.method == "halo" ? halo_weight(weight, opt.halo)
                                         : dense_weight(weight.dense());
    if (!opt.targets.count(target)) return std::make_unique<FrozenLinear>(std::move(frozen));
    return std::make_unique<LoraLinear>(name, std::move(frozen), opt.lora, rng);
  };
}

}  // namespace loft
