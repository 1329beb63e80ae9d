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

LinearFactory make_linear_factory(const MethodOptions& opt, std::mt19937_64& rng) {
  if (opt.method != "lora" && opt.method != "qlora")
    throw Error(cat("--method ", opt.method,
                    " is not built yet (FALQON and HALO are pending); use --method lora or qlora"));
  // LoRA keeps every frozen projection dense; QLoRA stores all seven NF4-DQ, adapted or not.
  const bool nf4 = opt.method == "qlora";
  return [opt, nf4, &rng](const std::string& name, const std::string& target,
                          Tensor weight) -> std::unique_ptr<AdaptedLinear> {
    auto frozen = nf4 ? nf4_weight(std::move(weight)) : dense_weight(std::move(weight));
    if (!opt.targets.count(target)) return std::make_unique<FrozenLinear>(std::move(frozen));
    return std::make_unique<LoraLinear>(name, std::move(frozen), opt.lora, rng);
  };
}

}  // namespace loft
